package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A CreateTaskResult is told from any other result in each era, with its
// task id and ttl; a 2026 one is flat, a 2025 one has its task inside.
func TestCreatedTask(t *testing.T) {
	for _, tc := range []struct {
		name, result string
		modern       bool
		id           string
		ttl          time.Duration
	}{
		{"2025", `{"task":{"taskId":"t1","status":"working","ttl":60000}}`, false, "t1", time.Minute},
		{"2025 without ttl", `{"task":{"taskId":"t2","status":"working","ttl":null}}`, false, "t2", 0},
		{"2026", `{"resultType":"task","taskId":"t3","status":"working","ttlMs":1500}`, true, "t3", 1500 * time.Millisecond},
		{"2026 plain result", `{"resultType":"complete","content":[]}`, true, "", 0},
		{"2026 shape in a 2025 call", `{"resultType":"task","taskId":"t4"}`, false, "", 0},
		{"2025 shape in a 2026 call", `{"task":{"taskId":"t5"}}`, true, "", 0},
		{"no id", `{"task":{"status":"working"}}`, false, "", 0},
	} {
		id, _, ttl, ok := createdTask(json.RawMessage(tc.result), tc.modern)
		if id != tc.id || ok != (tc.id != "") || ttl != tc.ttl {
			t.Errorf("%s: createdTask = %q, %v, %v; want %q, %v", tc.name, id, ttl, ok, tc.id, tc.ttl)
		}
	}
}

// The gateway's id replaces the backend's wherever a client reads it: a
// 2025 CreateTaskResult's task and related-task _meta, a Task, the
// related-task _meta of tasks/result; a failed task's snapshot says why,
// in each era's shape.
func TestTaskIDsExposed(t *testing.T) {
	tk := &task{id: "mcpgate-task-X", backendID: "b-1"}
	got := string(tk.exposedCreate([]byte(`{"task":{"taskId":"b-1","status":"working"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"b-1"}}}`)))
	if strings.Contains(got, "b-1") || strings.Count(got, "mcpgate-task-X") != 2 {
		t.Errorf("2025 CreateTaskResult exposed as %s", got)
	}
	got = string(tk.exposedResult([]byte(`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"b-1"}}}`)))
	if got != `{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"mcpgate-task-X"}}}` {
		t.Errorf("tasks/result exposed as %s", got)
	}
	if got := string(tk.exposedResult([]byte(`{"taskId":"other","status":"working"}`))); got != `{"taskId":"other","status":"working"}` {
		t.Errorf("another task's id was rewritten: %s", got)
	}

	table := newTaskTable(nil, 0, 0, 0)
	legacy := &task{id: "g", failed: `backend "x" went away`, last: json.RawMessage(`{"taskId":"g","status":"working"}`)}
	if got := string(table.snapshot(legacy)); !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"statusMessage":"backend \"x\" went away"`) {
		t.Errorf("failed 2025 task: %s", got)
	}
	modern := &task{id: "g", modern: true, failed: "gone", last: json.RawMessage(`{"resultType":"task","taskId":"g","status":"working"}`)}
	got = string(table.snapshot(modern))
	if !strings.Contains(got, `"status":"failed"`) || !strings.Contains(got, `"resultType":"complete"`) || !strings.Contains(got, `"error":{"code":-32000,"message":"gone"}`) {
		t.Errorf("failed 2026 task: %s", got)
	}
}
