package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// Each request a client sends has a server op (Options.Telemetry, see
// package telemetry), kept on the stream that answers it and ended by the
// response pushed there (or by the request's end without one); each
// message sent to a backend on a request's behalf has a client op, its
// child, kept in the call. With telemetry off there are none, and every
// hook below is a nil check.

// HandleRequestContext is HandleRequest of a request whose trace context
// ctx carries (the front's, from the request's headers; see
// telemetry.Telemetry.Extract): the request's server op starts here. ctx
// also carries the caller the front identified (access.CallerOf), whom
// the session's calls are then sent for (see upstream.go).
func (s *Session) HandleRequestContext(ctx context.Context, msg *jsonrpc.Message, stream *Stream) {
	s.noteCaller(ctx)
	if t := s.g.opts.Telemetry; t != nil {
		op := t.Server(ctx, msg.Method, msg.ID, msg.Params)
		op.SetSession(s.ID, s.Protocol)
		op.SetCaller(s.Client().Name, s.identity)
		stream.addOp(op)
	}
	s.HandleRequest(msg, stream)
}

// sessionTrace is what a session keeps for mcp.server.session.duration.
type sessionTrace struct {
	begun     time.Time
	transport string // guarded by the session's mu
}

// sessionEnded measures the session that just closed.
func (s *Session) sessionEnded() {
	if s.traced == nil {
		return
	}
	s.mu.Lock()
	transport := s.traced.transport
	s.mu.Unlock()
	s.g.opts.Telemetry.ServerSessionEnded(s.traced.begun, s.Protocol, transport)
}

// streamOps are the server ops of a stream's requests: one, or a batch's.
type streamOps struct {
	one  *telemetry.Op
	more []*telemetry.Op
}

// addOp keeps op until the answer to its request is pushed.
func (s *Stream) addOp(op *telemetry.Op) {
	if op == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		op.End(nil)
		return
	}
	if s.ops == nil {
		s.ops = &streamOps{one: op}
		return
	}
	s.ops.more = append(s.ops.more, op)
}

// op returns the server op of the request with the raw id, nil without
// telemetry: the stream's one op, or the one of a batch's requests.
func (s *Stream) op(id []byte) *telemetry.Op {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops == nil {
		return nil
	}
	if s.ops.more == nil {
		return s.ops.one
	}
	if o := s.ops.one; o != nil && o.ID() == string(id) {
		return o
	}
	for _, o := range s.ops.more {
		if o.ID() == string(id) {
			return o
		}
	}
	return nil
}

// endOpLocked ends the op of the request that resp answers; s.mu is
// held, and s.ops set.
func (s *Stream) endOpLocked(resp []byte) {
	if s.ops.more == nil {
		op := s.ops.one
		s.ops.one = nil
		op.End(resp)
		return
	}
	id := jsonrpc.ParseHead(resp).ID
	if id == nil {
		id, _, _ = jsonrpc.Lookup(resp, "id")
	}
	if o := s.ops.one; o != nil && o.ID() == string(id) {
		s.ops.one = nil
		o.End(resp)
		return
	}
	for i, o := range s.ops.more {
		if o.ID() == string(id) {
			s.ops.more = append(s.ops.more[:i], s.ops.more[i+1:]...)
			o.End(resp)
			return
		}
	}
}

// dropOpLocked ends the op of a request that ends without an answer, when
// the stream has only one (which a batch's drop does not say); s.mu is
// held.
func (s *Stream) dropOpLocked() {
	if s.ops.more == nil && s.ops.one != nil {
		s.ops.one.End(nil)
		s.ops.one = nil
	}
}

// endOpsLocked ends the ops of the requests left unanswered when the
// stream ends; s.mu is held.
func (s *Stream) endOpsLocked() {
	s.ops.one.End(nil)
	for _, o := range s.ops.more {
		o.End(nil)
	}
	s.ops = nil
}

// op returns the server op of the request msg on stream; nil, without
// looking, when telemetry is off.
func (s *Session) op(msg *jsonrpc.Message, stream *Stream) *telemetry.Op {
	if s.g.opts.Telemetry == nil {
		return nil
	}
	return stream.op(msg.ID)
}

// clientOp starts the op of a message (method, params) to backend b (an
// instance, for a pool) over conn (nil when b refused it) for the request
// with id answered on stream, and sets what is known of it: the tool or
// prompt by its name at the backend, the resource, the backend, and
// whether a fallback sends it.
func (s *Session) clientOp(id json.RawMessage, method string, stream *Stream, b *backend.Backend, conn *backend.Conn, params json.RawMessage, known forwardedParams, fb *fallback) *telemetry.Op {
	op := s.g.opts.Telemetry.Client(stream.op(id), method)
	op.SetBackend(b.Name(), b.Instance()) // an instance has its pool's name
	if !known.of(params) {
		known = forwarded(params)
	}
	switch method {
	case "tools/call":
		op.SetTool(known.name)
	case "prompts/get":
		op.SetPrompt(known.name)
	case "resources/read":
		if uri, _, err := stringParam(params, "uri"); err == nil {
			op.SetResource(uri)
		}
	}
	if fb != nil && b != fb.primary {
		op.SetFallback(fb.primary.Name())
	}
	if conn != nil {
		if server := conn.Server(); server != nil {
			op.SetProtocol(server.ProtocolVersion)
		}
		op.SetTransport(transportOf(conn, b))
	}
	return op
}

// roundOp starts the span of the call's input round n, a child of
// parent's: for a 2025 session, from the backend's input_required result
// until the call is sent again with the client's answers; for a stateless
// client, from the InputRequiredResult it got until its retry came.
func (c *call) roundOp(parent *telemetry.Op, n int) *telemetry.Op {
	t := c.sess.g.opts.Telemetry
	if !t.Tracing() {
		return nil
	}
	op := t.Internal(parent.Context(), "input_required", c.b.Name())
	op.SetBackend(c.b.Name(), c.b.Instance())
	op.SetRound(n)
	return op
}

// admissionOp starts the span of a call's wait for backend b to take it
// (what: "queue", "start" or "instance"); nil without tracing.
func (s *Session) admissionOp(msg *jsonrpc.Message, stream *Stream, b *backend.Backend, what string) *telemetry.Op {
	t := s.g.opts.Telemetry
	if !t.Tracing() {
		return nil
	}
	op := t.Internal(stream.op(msg.ID).Context(), "admission", b.Name())
	op.SetBackend(b.Name(), 0)
	op.SetAdmission(what)
	return op
}

// stepOp starts the span of step (number n) of composite, a child of
// ctx's span, the composite's call; nil without tracing.
func (s *Session) stepOp(ctx context.Context, step *jsonrpc.Message, composite string, n int) *telemetry.Op {
	t := s.g.opts.Telemetry
	if !t.Tracing() {
		return nil
	}
	op := t.Internal(ctx, step.Method, "")
	op.SetComposite(composite, n)
	op.SetCaller(s.Client().Name, s.identity)
	return op
}

// admitCode is the JSON-RPC code a client gets for a refused admission.
func admitCode(err error) int {
	var refused *backend.RefusedError
	if errors.As(err, &refused) && refused.Busy {
		return CodeBackendBusy
	}
	return CodeBackendUnavailable
}

// transportOf is network.transport of a backend's connection: a pipe to a
// child, TCP to a remote server.
func transportOf(conn *backend.Conn, b *backend.Backend) string {
	switch {
	case b.IsCLI():
		return "pipe"
	case conn.URL() != "":
		return "tcp"
	}
	return "pipe"
}

// traceContext is the context that names op's span, for journal entries
// and the backend: nil without telemetry.
func traceContext(op *telemetry.Op) context.Context {
	if op == nil {
		return nil
	}
	return op.Context()
}
