package gateway

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// InputHandler is the seam for MCP 2026-07-28's multi round-trip requests
// (InputRequiredResult). A stateless client cannot be sent a request: when
// a backend sends sampling/createMessage, elicitation/create or roots/list
// during a stateless call, the gateway hands it to Options.Input instead of
// relaying it on a session's stream. Only requests for a capability the
// client declared in the request's clientCapabilities get there; the
// others are refused as for a session. Without an InputHandler, the
// backend gets an error (see inputRequest).
type InputHandler interface {
	// HandleInput takes a backend's request made during a stateless call.
	// It runs on the backend's reader goroutine and must not block. It
	// owns in: it must answer the backend's request exactly once, with
	// in.Reply or in.ReplyError, now or later (a backend's
	// client_request_timeout is not applied to it).
	HandleInput(in *Input)
	// HandleRetry is offered, before routing, every stateless request
	// whose params carry requestState or inputResponses. It reports
	// whether it took the request; if so it must push exactly one
	// response on stream (PushResponse) or end it otherwise, as
	// HandleRequest does. If not, the request is routed as any other.
	// It runs before the client's policy, audit and limits are applied:
	// what it resumes must be bound to the client (s.Client()) and the
	// call that was checked when it started.
	HandleRetry(s *Session, msg *jsonrpc.Message, stream *Stream) bool
}

// Input is a backend's request to the client of a stateless call.
type Input struct {
	Backend *backend.Backend
	Conn    *backend.Conn    // the connection (or instance) the request came on
	Request *jsonrpc.Message // as the backend sent it, valid during HandleInput; its ID is in the backend's id space
	Session *Session         // the stateless request's context (Client, Protocol)
	// ClientID is the JSON-RPC id of the client's request in flight on
	// Conn that the backend's request belongs to, and Stream the stream
	// its answer goes on: the call the request was attributed to (see
	// attributeRequest).
	ClientID json.RawMessage
	Stream   *Stream

	id       json.RawMessage // Request.ID, kept: the backend's buffer is reused once Request returns
	call     *call
	answered sync.Once
}

// Client returns the client of the stateless request.
func (in *Input) Client() *access.Client { return in.Session.Client() }

// Capabilities returns the client capabilities the request declared that
// routing knows: sampling, elicitation and roots, each nil if undeclared.
func (in *Input) Capabilities() (sampling, elicitation, roots json.RawMessage) {
	c := in.Session.caps
	return c.Sampling, c.Elicitation, c.Roots
}

// Reply answers the backend's request with a result.
func (in *Input) Reply(result json.RawMessage) {
	in.settle()
	in.Conn.Reply(in.id, result)
}

// ReplyError answers the backend's request with an error.
func (in *Input) ReplyError(e *jsonrpc.Error) {
	in.settle()
	in.Conn.ReplyError(in.id, e)
}

// settle records, once, that the call no longer waits for this request's
// answer (see call.answered), before the backend can read it.
func (in *Input) settle() { in.answered.Do(in.call.answered) }

// inputRequest handles a backend's request to the client of a stateless
// call c of s: a ping is answered here; the rest goes to the
// InputHandler, or is refused when there is none.
func (g *Gateway) inputRequest(b *backend.Backend, conn *backend.Conn, msg *jsonrpc.Message, s *Session, c *call) {
	if msg.Method == "ping" {
		conn.Reply(msg.ID, json.RawMessage(`{}`))
		return
	}
	in := &Input{Backend: b, Conn: conn, Request: msg, Session: s, id: append(json.RawMessage(nil), msg.ID...)}
	if c != nil {
		in.ClientID, in.Stream, in.call = c.clientID, c.stream, c
		c.asked() // until in is answered
	}
	if h := g.opts.Input; h != nil && in.Stream != nil {
		h.HandleInput(in)
		return
	}
	g.log.Debug(fmt.Sprintf("refused %s of backend %q during a stateless call of client %q: no way to ask a 2026-07-28 client yet", msg.Method, b.Name(), s.Client().Name),
		"backend", b.Name(), "client", s.Client().Name, "method", msg.Method)
	in.ReplyError(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound,
		"mcpgate cannot relay %s to a client that speaks MCP %s: it has no session to send requests on", msg.Method, s.Protocol))
}

// latestCall returns the most recent call of s in flight on conn, or nil.
func latestCall(conn *backend.Conn, s *Session) *call {
	var latest *call
	var latestID int64
	conn.Calls(func(bc *backend.Call) {
		if c, ok := bc.Owner.(*call); ok && c.sess == s && bc.ID > latestID {
			latest, latestID = c, bc.ID
		}
	})
	return latest
}

// retried offers a stateless request that continues an input-required
// exchange to the InputHandler, and reports whether it took it.
func (s *Session) retried(msg *jsonrpc.Message, stream *Stream) bool {
	h := s.g.opts.Input
	if h == nil {
		return false
	}
	if h := s.headOf(msg.Params); h != nil {
		if !h.Retry {
			return false
		}
	} else if _, _, ok := jsonrpc.Lookup(msg.Params, "requestState"); !ok {
		if _, _, ok := jsonrpc.Lookup(msg.Params, "inputResponses"); !ok {
			return false
		}
	}
	if s.toModernBackend(msg) {
		return false // a 2026-07-28 backend's own exchange: routed as any call
	}
	return h.HandleRetry(s, msg, stream)
}

// capabilityOf names the client capability a backend's request needs
// to go on. roots/list is not there: servers ask for roots on their own
// and take a refusal as no roots.
var capabilityOf = map[string]string{"sampling/createMessage": "sampling", "elicitation/create": "elicitation"}

// missingCapability ends the stateless call that made a backend ask for
// what its client did not declare: the backend call is cancelled and the
// client gets -32021 naming the capability, so that it can declare it and
// send the request again, rather than whatever the backend makes of the
// refusal.
func (g *Gateway) missingCapability(conn *backend.Conn, msg *jsonrpc.Message, c *call) {
	method := msg.Method
	name, needed := capabilityOf[method]
	if !needed {
		return
	}
	required := `{}`
	if method == "elicitation/create" && elicitationMode(msg.Params) == "url" {
		name, required = "elicitation.url", `{"url":{}}`
	}
	e := jsonrpc.Errorf(CodeMissingClientCapability, "backend %q needs the client capability %q (it sent %s): declare it in %s and send the request again", conn.Backend().Name(), name, method, MetaClientCapabilities)
	e.Data = []byte(`{"requiredCapabilities":{"` + capabilityOf[method] + `":` + required + `}}`)
	if c.giveUp("the client lacks the capability "+name) && c.end() {
		c.stream.push(jsonrpc.AppendError(nil, c.clientID, e), true)
		g.callEnded()
	}
}
