package itest

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// research is the task-augmented call of server-everything's
// simulate-research-query, a 2025-11-25 task tool that works through four
// stages of a second each.
const research = `{"name":"everything__simulate-research-query","arguments":{"topic":"gateways"},"task":{"ttl":60000}}`

// Tasks of a 2025-11-25 server (server-everything) through the gateway:
// the capability only for a client that may use it, a task id of the
// gateway's, the task outliving the request that created it and an event
// stream, another client told of an unknown task whatever it asks, list
// and result for its owner (once, with the gateway's id in related-task),
// the backend's one call slot held while the task runs and freed when it
// ends, cancellation, the audit of each end, and a backend that crashes
// failing its task with an error that says so, told on the owner's stream.
func TestTasks2025ThroughTheGateway(t *testing.T) {
	d := tasksGateway(t)
	alice, init := newTaskSession(t, d.URL, aliceToken)
	if init.field(t, "capabilities", "tasks", "requests", "tools", "call") == nil || init.field(t, "capabilities", "tasks", "list") == nil {
		t.Errorf("alice's initialize %s; want the tasks capability", init.Result)
	}
	_, carolInit := newTaskSession(t, d.URL, carolToken)
	if carolInit.field(t, "capabilities", "tasks") != nil {
		t.Errorf("carol's initialize %s offers tasks; none of the backends she may use has them", carolInit.Result)
	}
	bob, _ := newTaskSession(t, d.URL, bobToken)
	testutil.Eventually(t, 60*time.Second, "server-everything's task tool", func() bool {
		a := alice.call(t, "tools/list", `{}`)
		return strings.Contains(string(a.Result), `"everything__simulate-research-query"`)
	})

	created := alice.call(t, "tools/call", research)
	id := created.str(t, "task", "taskId")
	if created.Error != nil || !strings.HasPrefix(id, "mcpgate-task-") || created.str(t, "task", "status") != "working" {
		t.Fatalf("the task-augmented call: %s %+v; want a CreateTaskResult with the gateway's task id, working", created.Result, created.Error)
	}
	// The request that created it is over, and the task goes on. alice's
	// event stream is where she hears of her tasks.
	events := alice.events(t)
	bobEvents := bob.events(t)

	// bob, another client, learns nothing of it, whatever he asks.
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		a := bob.call(t, method, `{"taskId":"`+id+`"}`)
		if a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Message, "unknown taskId") || strings.Contains(string(a.Result), "working") {
			t.Errorf("bob's %s of alice's task: %s %+v; want -32602 unknown taskId", method, a.Result, a.Error)
		}
	}
	if a := bob.call(t, "tasks/list", `{}`); strings.Contains(string(a.Result), id) {
		t.Errorf("bob's tasks/list %s shows alice's task", a.Result)
	}
	if a := alice.call(t, "tasks/list", `{}`); !strings.Contains(string(a.Result), `"taskId":"`+id+`"`) {
		t.Errorf("alice's tasks/list %s lacks her task", a.Result)
	}
	if a := alice.call(t, "tasks/get", `{"taskId":"`+id+`"}`); a.str(t, "taskId") != id || a.str(t, "status") == "" {
		t.Errorf("alice's tasks/get %s %+v; want her task's status under the gateway's id", a.Result, a.Error)
	}
	// While it runs it holds everything's one call slot; managing it does not
	// need one.
	if a := alice.call(t, "tools/call", `{"name":"everything__echo","arguments":{"message":"busy?"}}`); a.Error == nil || !strings.Contains(a.Error.Message, "max_concurrent_calls") {
		t.Errorf("a call while the task runs: %s %+v; want it refused by max_concurrent_calls", a.Result, a.Error)
	}

	result := alice.call(t, "tasks/result", `{"taskId":"`+id+`"}`)
	if result.Error != nil || !strings.Contains(string(result.Result), "Research Report") || result.str(t, "_meta", "io.modelcontextprotocol/related-task", "taskId") != id {
		t.Fatalf("tasks/result: %.300s %+v; want the report, related to the gateway's task id", result.Result, result.Error)
	}
	if a := alice.call(t, "tools/call", `{"name":"everything__echo","arguments":{"message":"free"}}`); a.Error != nil {
		t.Errorf("a call once the task ended: %+v; want its slot free", a.Error)
	}
	d.Stderr.Await(t, 10*time.Second, "the task's audit", func(out string) bool {
		return strings.Contains(out, "audit: alice task everything__simulate-research-query: task completed")
	})

	t.Run("outlives its event stream", func(t *testing.T) {
		// Another session of alice's, whose event stream closes while
		// its task runs: the task goes on, and its result comes once.
		s, _ := newTaskSession(t, d.URL, aliceToken)
		events, closeStream := s.closableEvents(t)
		id := s.call(t, "tools/call", research).str(t, "task", "taskId")
		closeStream()
		for range events { // until the stream is gone
		}
		result := s.call(t, "tasks/result", `{"taskId":"`+id+`"}`)
		if result.Error != nil || !strings.Contains(string(result.Result), "Research Report") {
			t.Fatalf("tasks/result after the stream closed: %.300s %+v; want the report", result.Result, result.Error)
		}
		d.Stderr.Await(t, 10*time.Second, "the task's audit", func(out string) bool {
			return strings.Count(out, "audit: alice task everything__simulate-research-query: task completed") == 2
		})
	})

	t.Run("cancelled", func(t *testing.T) {
		id := alice.call(t, "tools/call", research).str(t, "task", "taskId")
		a := alice.call(t, "tasks/cancel", `{"taskId":"`+id+`"}`)
		if a.Error != nil || a.str(t, "taskId") != id || a.str(t, "status") != "cancelled" {
			t.Errorf("tasks/cancel: %s %+v; want the task cancelled under the gateway's id", a.Result, a.Error)
		}
		d.Stderr.Await(t, 10*time.Second, "the cancelled task's audit", func(out string) bool {
			return strings.Contains(out, "task everything__simulate-research-query: task cancelled")
		})
	})

	t.Run("backend crash", func(t *testing.T) {
		id := alice.call(t, "tools/call", research).str(t, "task", "taskId")
		killBackend(t, d, "mcp-server-everything")
		deadline := time.After(30 * time.Second)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("the event stream ended before the task's failure was told")
				}
				if !strings.Contains(ev, `"notifications/tasks/status"`) || !strings.Contains(ev, id) {
					continue
				}
				if !strings.Contains(ev, `"status":"failed"`) || !strings.Contains(ev, `connection ended`) {
					t.Errorf("status notice %s; want the task failed, saying its backend's connection ended", ev)
				}
			case <-deadline:
				t.Fatal("alice's stream was never told her task failed")
			}
			break
		}
		// Told to alice alone: bob's stream, read after a request of his,
		// holds nothing of it.
		bob.call(t, "tasks/list", `{}`)
		for len(bobEvents) > 0 {
			if ev := <-bobEvents; strings.Contains(ev, id) {
				t.Errorf("bob was told of alice's task: %s", ev)
			}
		}
		a := alice.call(t, "tasks/get", `{"taskId":"`+id+`"}`)
		if a.str(t, "status") != "failed" || !strings.Contains(a.str(t, "statusMessage"), `backend "everything"`) {
			t.Errorf("tasks/get of the lost task: %s %+v; want it failed, naming the backend", a.Result, a.Error)
		}
		if r := alice.call(t, "tasks/result", `{"taskId":"`+id+`"}`); r.Error == nil || !strings.Contains(r.Error.Message, "connection ended") {
			t.Errorf("tasks/result of the lost task: %s %+v; want an error that says why", r.Result, r.Error)
		}
		d.Stderr.Await(t, 10*time.Second, "the failed task's audit", func(out string) bool {
			return strings.Contains(out, "task everything__simulate-research-query: task failed")
		})
	})
}
