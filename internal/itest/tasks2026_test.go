package itest

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Tasks of a 2026-07-28 server (the fixture's tasks extension) through
// the gateway, for stateless clients: server/discover offers the
// extension only to a client that may call the backend, a task gets the
// gateway's id and lives on after the request, another client's
// tasks/get, tasks/update and tasks/cancel of it (or of a guessed id) are
// told of an unknown task, its owner polls it to its inlined result, and
// a backend that crashes fails its task with an error that says so.
func TestTasks2026ThroughTheGateway(t *testing.T) {
	d := tasksGateway(t)
	discover := func(token string) rpc {
		return statelessTask(t, d.URL, token, "server/discover", "", `"x":0`, false)
	}
	testutil.Eventually(t, 60*time.Second, "the fixture's tasks extension", func() bool {
		return discover(aliceToken).field(t, "capabilities", "extensions", "io.modelcontextprotocol/tasks") != nil
	})
	if a := discover(carolToken); a.field(t, "capabilities", "extensions") != nil {
		t.Errorf("carol's server/discover %s offers the tasks extension; she may call no backend that has it", a.Result)
	}

	call := func(token string, seconds string) rpc {
		return statelessTask(t, d.URL, token, "tools/call", "modern__slow_compute", `"name":"modern__slow_compute","arguments":{"seconds":`+seconds+`,"label":"x"}`, false)
	}
	created := call(aliceToken, "1")
	id := created.str(t, "taskId")
	if created.Error != nil || created.str(t, "resultType") != "task" || !strings.HasPrefix(id, "mcpgate-task-") {
		t.Fatalf("the task tool: %s %+v; want a CreateTaskResult with the gateway's task id", created.Result, created.Error)
	}
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		params := `"taskId":"` + id + `"`
		if method == "tasks/update" {
			params += `,"inputResponses":{}`
		}
		a := statelessTask(t, d.URL, bobToken, method, id, params, false)
		if a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "unknown taskId") {
			t.Errorf("bob's %s of alice's task: %s %+v; want -32602 unknown taskId", method, a.Result, a.Error)
		}
	}
	guess := "mcpgate-task-AAAAAAAAAAAAAAAAAAAAAA"
	if a := statelessTask(t, d.URL, aliceToken, "tasks/get", guess, `"taskId":"`+guess+`"`, false); a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("a guessed id: %s %+v; want -32602", a.Result, a.Error)
	}
	if a := statelessTask(t, d.URL, aliceToken, "tasks/get", id, `"taskId":"`+id+`"`, true); a.Error == nil || a.Error.Code != -32021 {
		t.Errorf("tasks/get without the extension declared: %s %+v; want -32021", a.Result, a.Error)
	}
	var done rpc
	testutil.Eventually(t, 30*time.Second, "alice's task completed", func() bool {
		done = statelessTask(t, d.URL, aliceToken, "tasks/get", id, `"taskId":"`+id+`"`, false)
		return done.str(t, "status") == "completed"
	})
	if done.str(t, "taskId") != id || !strings.Contains(string(done.Result), "Computed x after 1s") {
		t.Errorf("the completed task %s; want its result inlined under the gateway's id", done.Result)
	}
	d.Stderr.Await(t, 10*time.Second, "the task's audit", func(out string) bool {
		return strings.Contains(out, "audit: alice task modern__slow_compute: task completed")
	})

	lost := call(aliceToken, "60").str(t, "taskId")
	killBackend(t, d, "everything-server-2026.mjs")
	testutil.Eventually(t, 30*time.Second, "the lost task failed", func() bool {
		return statelessTask(t, d.URL, aliceToken, "tasks/get", lost, `"taskId":"`+lost+`"`, false).str(t, "status") == "failed"
	})
	a := statelessTask(t, d.URL, aliceToken, "tasks/get", lost, `"taskId":"`+lost+`"`, false)
	if msg, _ := a.field(t, "error", "message").(string); !strings.Contains(msg, `backend "modern"`) || a.str(t, "resultType") != "complete" {
		t.Errorf("the lost task %s; want it failed with an error naming the backend", a.Result)
	}
}
