package gateway

import "github.com/mcpgate/mcpgate/internal/jsonrpc"

// This file is where tasks meet calls: a tools/call whose answer creates
// a task, and the requests about a task.

// createdTask registers the task a tools/call's answer created, if it did:
// the task takes the call's admission. refused is the error the client
// gets instead when the gateway routes no more tasks (the backend was
// told to cancel it).
func (c *call) createdTask(resp *jsonrpc.Message, err error) (created *task, refused *jsonrpc.Error) {
	if !c.creates || err != nil || resp.Error != nil || c.modern != c.sess.stateless { // a task of one era for the other's client is not routed
		return nil, nil
	}
	id, obj, ttl, ok := createdTask(resp.Result, c.modern)
	if !ok {
		return nil, nil
	}
	tk, rerr := c.sess.g.tasks.register(c, id, obj, ttl)
	if rerr != nil {
		return nil, jsonrpc.AsError(rerr)
	}
	return tk, nil
}

// abandon drops a task whose creating call ended before its answer (the
// client went away): nobody can learn its id, so it is cancelled at the
// backend, and ends.
func (t *taskTable) abandon(tk *task) {
	if tk == nil {
		return
	}
	t.cancelAtBackend(tk.conn, tk.backendID, tk.modern)
	t.finish(tk, taskCancelled, "")
	t.forget(tk)
}

// exposedCreate returns a CreateTaskResult with the gateway's task id:
// 2025's in its task, 2026's at the top.
func (tk *task) exposedCreate(result []byte) []byte {
	if tk.modern {
		return tk.exposeTask(result)
	}
	if obj, span, ok := jsonrpc.Lookup(result, "task"); ok {
		result = jsonrpc.Replace(result, span, tk.exposeTask(obj))
	}
	return tk.exposedResult(result) // and a related-task _meta, if any
}

// aboutTask marks c as a request about tk: its answer gets the gateway's
// id, and tells the task table what became of the task. A tasks/result
// waits for the task, not for the backend's timeout, and its result goes
// through the output pipeline as the tool's would.
func (c *call) aboutTask(method string, tk *task) {
	c.task = tk
	if method == "tasks/result" {
		c.until = tk.expires
		c.tool = tk.original
	}
}

// taskAnswered tells the task table what the backend answered a request
// about a task.
func (c *call) taskAnswered(resp *jsonrpc.Message, err error) {
	if c.task == nil || err != nil {
		return
	}
	method := "tasks/get"
	if !c.until.IsZero() {
		method = "tasks/result"
	}
	c.sess.g.tasks.answered(c.task, method, resp.Result, resp.Error != nil)
}
