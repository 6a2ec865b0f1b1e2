package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// sortTasks orders tasks by when they were created.
func sortTasks(list []*task) {
	slices.SortFunc(list, func(a, b *task) int { return a.created.Compare(b.created) })
}

// MCP Tasks through the gateway, in both eras: the experimental tasks of
// 2025-11-25 (a tools/call with params.task answered by a CreateTaskResult
// {task}, then tasks/get, tasks/result, tasks/list, tasks/cancel and
// notifications/tasks/status) and the io.modelcontextprotocol/tasks
// extension of 2026-07-28 (a tools/call the server answers with
// resultType "task", then tasks/get, tasks/update, tasks/cancel).
//
// The gateway gives every task it sees created an id of its own (random,
// so unique across backends, their instances and gateway hosts) and keeps,
// in this process's memory, which backend connection holds it under which
// id and which identity created it: the client and who authenticated as
// it (Session.sealedTo). A task's requests go to exactly that connection
// under the backend's id, and only for that identity; any other gets the
// error of an unknown task, never its status. The call that created a
// task keeps its admission (max_concurrent_calls) until the task ends, and
// the task's end is audited. A task of a connection that ends (the backend
// stopped, crashed or restarted) fails with an error that says so.

// MetaRelatedTask is the _meta member that ties a message to a task.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"

// TasksExtension is the 2026-07-28 extension of tasks.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Task statuses.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// terminalStatus reports whether a task in status s is over.
func terminalStatus(s string) bool {
	return s == taskCompleted || s == taskFailed || s == taskCancelled
}

// task is one task a backend created for a client.
type task struct {
	id        string // the gateway's, as clients know it
	backendID string // the backend's
	modern    bool   // created by a 2026-07-28 request
	b         *backend.Backend
	conn      *backend.Conn
	owner     string   // Session.sealedTo of its creator
	client    string   // the creator's client name
	identity  string   // who authenticated as it
	sess      *Session // the 2025 session that created it; nil for a stateless request
	tool      string   // the tool, as clients know it
	original  string   // the tool, as the backend knows it
	created   time.Time
	expires   time.Time

	// Guarded by taskTable.mu:
	adm    *backend.Admission // the creating call's, until the task ends
	status string
	ended  bool   // its end was audited and its admission released
	failed string // why the gateway failed it (its backend's connection ended); "" if it did not
	last   json.RawMessage
	timer  *time.Timer
}

// taskTable holds the tasks the gateway routes.
type taskTable struct {
	g                *Gateway
	max, maxPerOwner int
	maxTTL           time.Duration

	mu        sync.Mutex
	byID      map[string]*task
	byBackend map[taskKey]*task
	perClient map[string]int
}

type taskKey struct {
	conn *backend.Conn
	id   string
}

// defaultMaxTaskTTL is how long a task is kept at most when the gateway
// was given no bound.
const defaultMaxTaskTTL = 24 * time.Hour

func newTaskTable(g *Gateway, max, maxPerClient int, maxTTL time.Duration) *taskTable {
	if maxTTL <= 0 {
		maxTTL = defaultMaxTaskTTL
	}
	return &taskTable{g: g, max: max, maxPerOwner: maxPerClient, maxTTL: maxTTL,
		byID: map[string]*task{}, byBackend: map[taskKey]*task{}, perClient: map[string]int{}}
}

// newTaskID returns a random task id: 128 bits, so that none is guessed
// and none is the same on two hosts.
func newTaskID() string {
	var b [16]byte
	rand.Read(b[:])
	return "mcpgate-task-" + base64.RawURLEncoding.EncodeToString(b[:])
}

var quotedTask = []byte(`"task"`)

// createdTask reads a backend's answer to a tools/call: a CreateTaskResult
// of either era. It returns the backend's task id, the task object (the
// 2025 result's task, the 2026 result itself) and its ttl, and false for
// any other result.
func createdTask(result json.RawMessage, modern bool) (id string, obj json.RawMessage, ttl time.Duration, ok bool) {
	// Either era's CreateTaskResult holds the string "task" (2026's
	// resultType, 2025's member): any other result is passed at the cost
	// of a scan, without a lookup.
	if !bytes.Contains(result, quotedTask) {
		return "", nil, 0, false
	}
	obj = result
	ttlKey := "ttlMs"
	if modern {
		if rt, _, _ := jsonrpc.Lookup(result, "resultType"); string(rt) != `"task"` {
			return "", nil, 0, false
		}
	} else {
		var found bool
		if obj, _, found = jsonrpc.Lookup(result, "task"); !found {
			return "", nil, 0, false
		}
		ttlKey = "ttl"
	}
	raw, _, found := jsonrpc.Lookup(obj, "taskId")
	id, isString := jsonrpc.StringValue(raw)
	if !found || !isString || id == "" {
		return "", nil, 0, false
	}
	if v, _, found := jsonrpc.Lookup(obj, ttlKey); found {
		var ms float64
		if json.Unmarshal(v, &ms) == nil && ms > 0 {
			ttl = time.Duration(ms * float64(time.Millisecond))
		}
	}
	return id, obj, ttl, true
}

// register records a task the backend of c created, with the call's
// admission, and returns it; the error says why the gateway refuses to
// route it (too many tasks), after cancelling it at the backend.
func (t *taskTable) register(c *call, backendID string, obj json.RawMessage, ttl time.Duration) (*task, error) {
	s := c.sess
	now := time.Now()
	if ttl <= 0 || ttl > t.maxTTL {
		ttl = t.maxTTL
	}
	tk := &task{
		id: newTaskID(), backendID: backendID, modern: c.modern, b: c.b, conn: c.conn,
		owner: s.sealedTo(), client: s.Client().Name, identity: s.identity,
		tool: catalog.ExposedName(c.b.Config().ToolPrefix, c.tool), original: c.tool, created: now, expires: now.Add(ttl),
		adm: c.adm, status: taskWorking,
	}
	if !s.stateless {
		tk.sess = s
	}
	if st, _, ok := jsonrpc.Lookup(obj, "status"); ok {
		tk.status, _ = jsonrpc.StringValue(st)
	}
	t.mu.Lock()
	switch {
	case t.max > 0 && len(t.byID) >= t.max:
		t.mu.Unlock()
		t.cancelAtBackend(c.conn, backendID, c.modern)
		return nil, jsonrpc.Errorf(CodeOverloaded, "the gateway already routes %d tasks (max_tasks); retry once one ended", t.max)
	case t.maxPerOwner > 0 && t.perClient[tk.client] >= t.maxPerOwner:
		t.mu.Unlock()
		t.cancelAtBackend(c.conn, backendID, c.modern)
		return nil, jsonrpc.Errorf(CodeOverloaded, "client %q already has %d tasks (max_tasks_per_client); retry once one ended", tk.client, t.maxPerOwner)
	}
	c.adm = nil // the task's from now on
	t.byID[tk.id] = tk
	t.byBackend[taskKey{c.conn, backendID}] = tk
	t.perClient[tk.client]++
	tk.last = tk.exposeTask(obj)
	tk.timer = time.AfterFunc(ttl, func() { t.expire(tk) })
	terminal := terminalStatus(tk.status)
	t.mu.Unlock()
	t.g.log.Debug(fmt.Sprintf("backend %q created a task for client %q", c.b.Name(), tk.client),
		"backend", c.b.Name(), "client", tk.client, "task", tk.id, "tool", tk.tool)
	if terminal {
		t.finish(tk, tk.status, "")
	}
	return tk, nil
}

// cancelAtBackend asks a backend to cancel a task the gateway does not
// route. (A modern task of a dual server's connection is asked in the
// connection's own era: at worst the server does not know it.)
func (t *taskTable) cancelAtBackend(conn *backend.Conn, backendID string, modern bool) {
	params := append(jsonrpc.AppendString([]byte(`{"taskId":`), backendID), '}')
	conn.Async("tasks/cancel", params, conn.Backend().Config().Timeout, func(*jsonrpc.Message, error) {})
}

// lookup returns the task of id, if the caller s created it.
func (t *taskTable) lookup(s *Session, id string) *task {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.byID[id]
	if tk == nil || tk.owner != s.sealedTo() {
		return nil // another identity's is as good as none
	}
	return tk
}

// ofBackend returns the task a backend's connection knows as id.
func (t *taskTable) ofBackend(conn *backend.Conn, id string) *task {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byBackend[taskKey{conn, id}]
}

// observe records what a backend said of a task (a Task, a DetailedTask,
// a status notice): its status, and for a 2025 task the object, for
// tasks/list. A terminal status ends the task.
func (t *taskTable) observe(tk *task, obj json.RawMessage) {
	st, _, ok := jsonrpc.Lookup(obj, "status")
	status, isString := jsonrpc.StringValue(st)
	if !ok || !isString {
		return
	}
	t.mu.Lock()
	if tk.failed == "" {
		tk.status = status
		if !tk.modern {
			tk.last = tk.exposeTask(obj)
		}
	}
	t.mu.Unlock()
	if terminalStatus(status) {
		t.finish(tk, status, "")
	}
}

// finish ends a task once: its admission is released, and its end
// audited. why, if not "", is why the gateway failed it.
func (t *taskTable) finish(tk *task, status, why string) {
	t.mu.Lock()
	if tk.ended {
		t.mu.Unlock()
		return
	}
	tk.ended = true
	adm := tk.adm
	tk.adm = nil
	if why != "" {
		tk.failed, tk.status = why, taskFailed
	}
	t.mu.Unlock()
	if adm != nil {
		outcome := "ok"
		if status != taskCompleted {
			outcome = "error"
		}
		adm.Done(outcome)
	}
	t.audit(tk, status)
}

// audit journals a task's end, as a call's is: who created it, of which
// tool, how long it ran and how it ended.
func (t *taskTable) audit(tk *task, status string) {
	g := t.g
	if !g.opts.Audit {
		return
	}
	h := g.log.Handler()
	if !h.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	session := ""
	if tk.sess != nil {
		session = tk.sess.ID
	}
	now := time.Now()
	journal.WriteAudit(context.Background(), h, &journal.Audit{
		Time: now, Client: tk.client, Identity: tk.identity, Session: session, Backend: tk.b.Name(),
		What: "tool", Name: tk.tool, Method: "task", Duration: now.Sub(tk.created), Outcome: "task " + status,
	})
}

// expire forgets a task its ttl (bounded by max_task_ttl) is over for.
func (t *taskTable) expire(tk *task) {
	t.finish(tk, "expired", "")
	t.forget(tk)
}

func (t *taskTable) forget(tk *task) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[tk.id] != tk {
		return
	}
	delete(t.byID, tk.id)
	delete(t.byBackend, taskKey{tk.conn, tk.backendID})
	if t.perClient[tk.client]--; t.perClient[tk.client] <= 0 {
		delete(t.perClient, tk.client)
	}
	tk.timer.Stop()
}

// connEnded fails every task of a connection that ended: nothing is left
// to finish or to answer for them. Their owners' sessions are told.
func (t *taskTable) connEnded(conn *backend.Conn, why string) {
	var gone []*task
	t.mu.Lock()
	for k, tk := range t.byBackend {
		if k.conn == conn && !tk.ended {
			gone = append(gone, tk)
		}
	}
	t.mu.Unlock()
	for _, tk := range gone {
		t.finish(tk, taskFailed, why)
		t.g.notifyTaskFailed(tk)
	}
}

// all returns the tasks of owner of one era, oldest first.
func (t *taskTable) all(owner string, modern bool) []*task {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*task
	for _, tk := range t.byID {
		if tk.owner == owner && tk.modern == modern {
			out = append(out, tk)
		}
	}
	sortTasks(out)
	return out
}

// exposeTask returns a task object with the gateway's id for the
// backend's.
func (tk *task) exposeTask(obj json.RawMessage) json.RawMessage {
	raw, span, ok := jsonrpc.Lookup(obj, "taskId")
	if id, _ := jsonrpc.StringValue(raw); !ok || id != tk.backendID {
		return obj
	}
	return jsonrpc.Replace(obj, span, jsonrpc.AppendString(nil, tk.id))
}
