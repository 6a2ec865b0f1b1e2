package gateway

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Notification handles a notification a backend sent. It runs on the
// backend's reader goroutine, so messages reach each stream in the order the
// backend wrote them.
func (g *Gateway) Notification(b *backend.Backend, conn *backend.Conn, msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/progress":
		tokRaw, span, ok := jsonrpc.Lookup(msg.Params, "progressToken")
		if !ok {
			return
		}
		v, ok := g.progress.Load(string(tokRaw))
		if !ok {
			return // the call ended; late progress is dropped
		}
		c := v.(*call)
		if c.conn != conn {
			g.log.Warn(fmt.Sprintf("backend %q: dropped progress for a call on another backend", b.Name()), "backend", b.Name())
			return
		}
		c.progressed()
		c.answering.Store(true) // partly answered: a fallback would repeat its side effects
		params := jsonrpc.Replace(msg.Params, span, c.clientToken)
		c.sess.send(jsonrpc.AppendNotification(nil, msg.Method, params), c.stream)
	case "notifications/message":
		if g.opts.OnLog != nil {
			g.opts.OnLog(b, msg.Params)
		}
		g.logMessage(b.Name(), conn, msg)
	case "notifications/resources/updated":
		params, uri, ok := exposedUpdate(g.Catalog(), b.Name(), msg.Params)
		if !ok {
			return
		}
		if conn.Modern() {
			params = legacyParams(params) // without our own subscription's id
		}
		data := jsonrpc.AppendNotification(nil, msg.Method, params)
		dedicated := ownerSession(conn) // an instance's updates are its session's alone
		updated := func(s *Session) {
			s.mu.Lock()
			owner, subscribed := s.subs[uri]
			s.mu.Unlock()
			if subscribed && owner == b.Name() && (dedicated == nil || dedicated == s) {
				if s.listenTag() != nil {
					s.standalone.push(s.notification(msg.Method, params), false)
					return
				}
				s.standalone.push(data, false)
			}
		}
		g.eachSession(updated)
		g.eachListener(updated)
	case "notifications/elicitation/complete":
		g.elicitationComplete(b, msg)
	case methodTaskStatus, methodTaskNotice:
		g.taskNotification(b, conn, msg)
	case "notifications/cancelled":
		idRaw, span, ok := jsonrpc.Lookup(msg.Params, "requestId")
		if !ok {
			return
		}
		r := g.takeRelay(conn, idRaw)
		if r == nil {
			return
		}
		r.sess.mu.Lock()
		delete(r.sess.relays, r.clientID)
		r.sess.mu.Unlock()
		params := jsonrpc.Replace(msg.Params, span, jsonrpc.IntID(r.clientID))
		r.sess.send(jsonrpc.AppendNotification(nil, msg.Method, params), r.via)
	default:
		// Unknown notifications pass through untouched (but for what
		// 2026-07-28 adds, from a modern backend), to the one session they
		// can be attributed to, else to every session.
		params := msg.Params
		if conn.Modern() {
			params = legacyParams(params)
		}
		data := jsonrpc.AppendNotification(nil, msg.Method, params)
		if s, via := attribute(conn); s != nil {
			s.send(data, via)
			return
		}
		g.eachSession(func(s *Session) {
			if s.seesBackend(b.Name()) {
				s.standalone.push(data, false)
			}
		})
	}
}

// logMessage forwards a backend's log message: on the stream of the call in
// flight if one session has calls on the backend, else to every session
// that asked for logging. Each session's level filters.
func (g *Gateway) logMessage(name string, conn *backend.Conn, msg *jsonrpc.Message) {
	level, _, _ := stringParam(msg.Params, "level")
	prio, _ := journal.MCPLevelPriority(level) // an unknown level counts as info
	data := jsonrpc.AppendNotification(nil, msg.Method, msg.Params)
	wants := func(s *Session, requireLevel bool) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.logLevel < 0 {
			// A stateless request without a logLevel gets no log
			// messages at all, as 2026-07-28 demands.
			return !requireLevel && !s.stateless
		}
		return prio <= s.logLevel
	}
	if s, via := attribute(conn); s != nil {
		if wants(s, false) {
			s.send(data, via)
		}
		return
	}
	g.eachSession(func(s *Session) {
		if wants(s, true) && s.seesBackend(name) {
			s.standalone.push(data, false)
		}
	})
}

// Request handles a request a backend sent to its client: roots come from
// the configuration if it has them; everything else goes to the one session
// with a call in flight on that backend, or is refused with an error that
// says why. A ping nobody can relay is answered here, and so is a
// roots/list outside any client call (servers ask at every start): with no
// roots.
func (g *Gateway) Request(b *backend.Backend, conn *backend.Conn, msg *jsonrpc.Message) {
	cfg := b.Config()
	refuse := func(code int, format string, args ...any) {
		conn.ReplyError(msg.ID, jsonrpc.Errorf(code, format, args...))
	}
	if msg.Method == "roots/list" && len(cfg.Roots) > 0 {
		conn.Reply(msg.ID, rootsResult(cfg.Roots))
		return
	}
	if !cfg.RelayClientRequests {
		if msg.Method == "ping" {
			conn.Reply(msg.ID, json.RawMessage(`{}`))
			return
		}
		refuse(jsonrpc.CodeMethodNotFound, "mcpgate does not relay %s for backend %q (relay_client_requests = false)", msg.Method, b.Name())
		return
	}
	if !declares(cfg, msg.Method) {
		refuse(jsonrpc.CodeMethodNotFound, "mcpgate did not declare to backend %q the client capability %s needs (client_capabilities)", b.Name(), msg.Method)
		return
	}
	if g.taskRequestToClient(conn, msg) {
		return
	}
	s, c, n := attributeRequest(conn, time.Now())
	if s == nil {
		if msg.Method == "ping" {
			conn.Reply(msg.ID, json.RawMessage(`{}`))
			return
		}
		if n == 0 && msg.Method == "roots/list" {
			g.noRoots(b, conn, msg, "no client call is in flight")
			return
		} else if n > 1 {
			refuse(jsonrpc.CodeInternalError, "mcpgate cannot relay %s: %d client sessions have requests in flight on backend %q that could have sent it, and the request does not say which one it belongs to", msg.Method, n, b.Name())
			return
		}
		refuse(jsonrpc.CodeInternalError, "mcpgate cannot relay %s: no client request is in flight on backend %q, so there is no client to ask", msg.Method, b.Name())
		return
	}
	if !s.mayAsk(msg.Method, msg.Params) {
		if msg.Method == "elicitation/create" && elicitationMode(msg.Params) == "url" {
			refuse(jsonrpc.CodeMethodNotFound, "the client did not declare URL-mode elicitation (elicitation.url)")
		} else {
			refuse(jsonrpc.CodeMethodNotFound, "the client did not declare the capability %s needs", msg.Method)
		}
		if s.stateless && c != nil {
			g.missingCapability(conn, msg, c)
		}
		return
	}
	if s.stateless {
		g.inputRequest(b, conn, msg, s, c)
		return
	}
	if err := s.relay(conn, msg, c); err != nil {
		refuse(jsonrpc.CodeInternalError, "mcpgate cannot relay %s: %v", msg.Method, err)
		return
	}
	answering(conn, s)
}

// declares reports whether mcpgate declared to the backend of cfg the
// client capability a request of method needs (see
// config.Backend.Declared); ping needs none.
func declares(cfg *config.Backend, method string) bool {
	d := cfg.Declared()
	switch method {
	case "sampling/createMessage":
		return d.Sampling
	case "elicitation/create":
		return d.Elicitation
	case "roots/list":
		return d.Roots
	}
	return true
}

// noRoots answers a roots/list no client can answer with an empty list:
// the backend has no roots configured, and nobody to ask.
func (g *Gateway) noRoots(b *backend.Backend, conn *backend.Conn, msg *jsonrpc.Message, why string) {
	g.log.Debug(fmt.Sprintf("answered roots/list of backend %q with no roots: it has no roots configured and %s", b.Name(), why), "backend", b.Name())
	conn.Reply(msg.ID, json.RawMessage(`{"roots":[]}`))
}

func rootsResult(roots []string) json.RawMessage {
	out := []byte(`{"roots":[`)
	for i, r := range roots {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"uri":`...)
		out = jsonrpc.AppendString(out, r)
		out = append(out, '}')
	}
	return append(out, "]}"...)
}

var _ backend.Handler = (*Gateway)(nil)

// String describes a session for logs.
func (s *Session) String() string { return fmt.Sprintf("session %s", s.ID) }
