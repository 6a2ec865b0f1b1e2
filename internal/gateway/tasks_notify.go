package gateway

import (
	"encoding/json"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file is what a backend says of its tasks on its own, and what the
// gateway advertises of them: status notices go to the client that owns
// the task, requests tied to a task to its session, and the capability
// to a client only when a backend it may use offers it.

// Status notices of tasks: 2025-11-25's, and the 2026-07-28 extension's
// on subscriptions/listen streams.
const (
	methodTaskStatus = "notifications/tasks/status"
	methodTaskNotice = "notifications/tasks"
)

// taskNotification passes a backend's notice of one of its tasks, with the
// gateway's id, to the task's owner: the session that created a 2025 task
// (or, once it ended, another session of the same client and identity), the
// subscriptions/listen streams of a 2026 task's identity. A notice of a
// task the gateway does not route goes nowhere.
func (g *Gateway) taskNotification(b *backend.Backend, conn *backend.Conn, msg *jsonrpc.Message) {
	raw, _, _ := jsonrpc.Lookup(msg.Params, "taskId")
	id, _ := jsonrpc.StringValue(raw)
	tk := g.tasks.ofBackend(conn, id)
	if tk == nil {
		g.log.Debug("dropped a notice of a task the gateway does not route", "backend", b.Name(), "method", msg.Method)
		return
	}
	g.tasks.observe(tk, msg.Params)
	g.tellOwner(tk, msg.Method, tk.exposeTask(msg.Params))
}

// notifyTaskFailed tells a task's owner that the gateway failed it.
func (g *Gateway) notifyTaskFailed(tk *task) {
	method := methodTaskStatus
	if tk.modern {
		method = methodTaskNotice
	}
	g.tellOwner(tk, method, g.tasks.snapshot(tk))
}

// tellOwner sends a notification about tk to its owner.
func (g *Gateway) tellOwner(tk *task, method string, params json.RawMessage) {
	if tk.modern {
		g.eachListener(func(s *Session) {
			if s.sealedTo() == tk.owner {
				s.standalone.push(s.notification(method, params), false)
			}
		})
		return
	}
	if s := g.taskSession(tk); s != nil {
		s.standalone.push(jsonrpc.AppendNotification(nil, method, params), false)
	}
}

// taskSession returns the session a 2025 task's messages go to: the one
// that created it while it is open, else the newest open session of the
// same client and identity, else nil.
func (g *Gateway) taskSession(tk *task) *Session {
	if tk.sess != nil && !tk.sess.isClosed() {
		return tk.sess
	}
	var found *Session
	g.eachSession(func(s *Session) {
		if s.sealedTo() == tk.owner && !s.isClosed() && (found == nil || s.lastSeen().After(found.lastSeen())) {
			found = s
		}
	})
	return found
}

// relatedTask returns the task a backend's request belongs to, by its
// related-task _meta, and the request's params with the gateway's id.
func (g *Gateway) relatedTask(conn *backend.Conn, params json.RawMessage) (*task, json.RawMessage) {
	raw, span, ok := jsonrpc.LookupPath(params, "_meta", MetaRelatedTask, "taskId")
	id, _ := jsonrpc.StringValue(raw)
	if !ok || id == "" {
		return nil, params
	}
	tk := g.tasks.ofBackend(conn, id)
	if tk == nil {
		return nil, params
	}
	return tk, jsonrpc.Replace(params, span, jsonrpc.AppendString(nil, tk.id))
}

// taskCall is the request of s about tk in flight on conn (a
// tasks/result, which waits for the task), whose stream a request tied to
// tk goes on; nil if there is none (the session's standalone stream).
func taskCall(conn *backend.Conn, s *Session, tk *task) *call {
	var found *call
	conn.Calls(func(bc *backend.Call) {
		if c, ok := bc.Owner.(*call); ok && c.sess == s && c.task == tk {
			found = c
		}
	})
	return found
}

// tasksOffered reports what of tasks a backend offers its clients:
// 2025-11-25's task-augmented tools/call, or the 2026-07-28 extension, of
// a server that speaks 2026-07-28 (the extension in a 2025-only server's
// initialize result is no way to reach it).
func tasksOffered(info *backend.ServerInfo) (legacy, modern bool) {
	c := info.Capabilities
	if _, _, ok := jsonrpc.LookupPath(c.Tasks, "requests", "tools", "call"); ok {
		legacy = true
	}
	modern = declaresTasks(c.Extensions) && info.Era() != backend.EraLegacy
	return legacy, modern
}

// callsBackend reports whether the session's client may call a tool of
// the named backend: what may create a task there.
func (s *Session) callsBackend(name string) bool {
	v := s.view()
	cat := s.g.Catalog()
	for _, e := range cat.Tools {
		if e.Backend == name && v.tool(cat, e.Name) {
			return true
		}
	}
	return false
}

// legacyTasksCapability is the tasks capability a 2025 session is offered
// when a backend it may use offers tasks: the gateway lists and cancels
// them itself, and tools/call is what may create one.
const legacyTasksCapability = `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`

// modernTasksCapability is the extensions member of a 2026-07-28
// server/discover when a backend the client may use offers tasks.
const modernTasksCapability = `"extensions":{"` + TasksExtension + `":{}}`

// isClosed reports whether the session ended.
func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// lastSeen is when the session's client last sent something.
func (s *Session) lastSeen() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastActive
}

// taskRequestToClient relays a backend's request tied to one of its 2025
// tasks (by its related-task _meta) to the task's session, on the stream
// of a tasks/result that waits for the task if one does, and reports
// whether it was one: such a request belongs to that client whatever
// else is in flight on the backend.
func (g *Gateway) taskRequestToClient(conn *backend.Conn, msg *jsonrpc.Message) bool {
	tk, params := g.relatedTask(conn, msg.Params)
	if tk == nil || tk.modern {
		return false
	}
	s := g.taskSession(tk)
	switch {
	case s == nil:
		conn.ReplyError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgate cannot relay %s of task %s: no session of its client is open", msg.Method, tk.id))
	case !s.mayAsk(msg.Method, params):
		conn.ReplyError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "the client did not declare the capability %s needs", msg.Method))
	default:
		var via *Stream
		c := taskCall(conn, s, tk)
		if c != nil {
			via = c.stream
		}
		if err := s.relayWith(conn, append(json.RawMessage(nil), msg.ID...), msg.Method, params, via, nil, c); err != nil {
			conn.ReplyError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgate cannot relay %s: %v", msg.Method, err))
		}
	}
	return true
}
