package gateway

import (
	"encoding/json"
	"strings"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// taskMethods are the requests about a task, by era: 2025-11-25's, and
// the 2026-07-28 extension's (which has no tasks/result or tasks/list).
var taskMethods = map[string]struct{ legacy, modern bool }{
	"tasks/get":    {true, true},
	"tasks/result": {true, false},
	"tasks/cancel": {true, true},
	"tasks/list":   {true, false},
	"tasks/update": {false, true},
}

// declaresTasks reports whether a client's extensions capability holds
// the tasks extension.
func declaresTasks(extensions json.RawMessage) bool {
	_, _, ok := jsonrpc.Lookup(extensions, TasksExtension)
	return ok
}

// taskRequest answers a client's request about a task: it goes to the
// connection that created the task, under the backend's id, when the
// caller's identity created it; every other caller is told of an unknown
// task.
func (s *Session) taskRequest(msg *jsonrpc.Message, stream *Stream) {
	fail := func(e *jsonrpc.Error) { stream.push(jsonrpc.AppendError(nil, msg.ID, e), true) }
	g := s.g
	era := taskMethods[msg.Method]
	if s.stateless && !era.modern || !s.stateless && !era.legacy {
		fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s (not a method of tasks in MCP %s)", msg.Method, s.Protocol))
		return
	}
	if s.stateless && !declaresTasks(s.caps.Extensions) {
		e := jsonrpc.Errorf(CodeMissingClientCapability, "%s needs the client capability extensions[%q]: declare it in %s and send the request again", msg.Method, TasksExtension, MetaClientCapabilities)
		e.Data = []byte(`{"requiredCapabilities":{"extensions":{"` + TasksExtension + `":{}}}}`)
		fail(e)
		return
	}
	if msg.Method == "tasks/list" {
		s.listTasks(msg, stream)
		return
	}
	id, span, err := stringParam(msg.Params, "taskId")
	if err != nil {
		fail(jsonrpc.AsError(err))
		return
	}
	tk := g.tasks.lookup(s, id)
	switch {
	case tk == nil:
		fail(&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown taskId " + quote(id) + ": no task of this client has it (it ended and expired, was created on another host, or never was)"})
		return
	case tk.modern != s.stateless:
		era := "2025-11-25 session"
		if tk.modern {
			era = "2026-07-28 request"
		}
		fail(&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task " + quote(id) + " was created by a " + era + "; ask for it in that era"})
		return
	}
	if why := g.tasks.failure(tk); why != "" {
		s.failedTask(msg, stream, tk, why)
		return
	}
	params := jsonrpc.Replace(msg.Params, span, jsonrpc.AppendString(nil, tk.backendID))
	// Managing a task is not a call: the task holds its slot already, and
	// a backend at its max_concurrent_calls must still take these.
	s.sendAbout(msg, stream, tk.b, backend.Unlimited(tk.conn), nil, params, forwarded(params), nil, nil, tk)
}

// failedTask answers a request about a task the gateway failed (its
// backend's connection ended): tasks/get with the task failed and why,
// tasks/cancel as for any task that is over, and tasks/result and
// tasks/update with the error.
func (s *Session) failedTask(msg *jsonrpc.Message, stream *Stream, tk *task, why string) {
	reply := func(result json.RawMessage) { stream.push(jsonrpc.AppendResult(nil, msg.ID, result), true) }
	fail := func(code int) {
		stream.push(errorResponse(msg.ID, code, "task %s failed: %s", tk.id, why), true)
	}
	switch {
	case msg.Method == "tasks/get":
		reply(s.g.tasks.snapshot(tk))
	case msg.Method == "tasks/cancel" && tk.modern:
		reply(json.RawMessage(`{"resultType":"complete"}`))
	case msg.Method == "tasks/cancel":
		fail(jsonrpc.CodeInvalidParams) // as for a task that is over
	default:
		fail(CodeBackendUnavailable)
	}
}

// listTasks answers a 2025 session's tasks/list with the tasks its
// identity created, as last seen: the gateway knows them, its backends
// each only their own.
func (s *Session) listTasks(msg *jsonrpc.Message, stream *Stream) {
	out := []byte(`{"tasks":[`)
	for i, tk := range s.g.tasks.all(s.sealedTo(), false) {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, s.g.tasks.snapshot(tk)...)
	}
	stream.push(jsonrpc.AppendResult(nil, msg.ID, append(out, "]}"...)), true)
}

// snapshot is what the gateway last knew of a task, as a Task (2025) or
// a DetailedTask (2026): the backend's last word, or the failure the
// gateway made of it.
func (t *taskTable) snapshot(tk *task) json.RawMessage {
	t.mu.Lock()
	last, why := tk.last, tk.failed
	t.mu.Unlock()
	if why == "" {
		return last
	}
	out, err := jsonrpc.SetMember(last, "status", []byte(`"`+taskFailed+`"`))
	if err != nil {
		return last
	}
	if tk.modern {
		out, _ = jsonrpc.SetMember(out, "resultType", []byte(`"complete"`))
		e := jsonrpc.AppendError(nil, json.RawMessage("0"), jsonrpc.Errorf(CodeBackendUnavailable, "%s", why))
		obj, _, _ := jsonrpc.Lookup(e, "error")
		out, _ = jsonrpc.SetMember(out, "error", obj)
		return out
	}
	out, _ = jsonrpc.SetMember(out, "statusMessage", jsonrpc.AppendString(nil, why))
	return out
}

// failure returns why the gateway failed tk, "" if it did not.
func (t *taskTable) failure(tk *task) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tk.failed
}

// exposedResult returns a backend's answer to a request about tk with the
// gateway's id for the backend's: in a Task or DetailedTask, and in the
// related-task _meta of a 2025 tasks/result.
func (tk *task) exposedResult(result json.RawMessage) json.RawMessage {
	result = tk.exposeTask(result)
	raw, span, ok := jsonrpc.LookupPath(result, "_meta", MetaRelatedTask, "taskId")
	if id, _ := jsonrpc.StringValue(raw); ok && id == tk.backendID {
		result = jsonrpc.Replace(result, span, jsonrpc.AppendString(nil, tk.id))
	}
	return result
}

// answered records what the backend answered a request about tk (method,
// its result or error).
func (t *taskTable) answered(tk *task, method string, result json.RawMessage, failed bool) {
	switch {
	case method == "tasks/result":
		// The task's outcome, once: it is over.
		status := taskCompleted
		if failed {
			status = taskFailed
		}
		t.finish(tk, status, "")
	case !failed && (method == "tasks/get" || method == "tasks/cancel"):
		t.observe(tk, result)
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
