package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// HandleRequest answers a request from the client. The answer, and any
// message that belongs to the request before it, is pushed on stream;
// HandleRequest itself does not wait for backends.
func (s *Session) HandleRequest(msg *jsonrpc.Message, stream *Stream) { s.handle(msg, stream, false) }

// handle is HandleRequest; waited is set when the request comes back
// after waiting for backends in their first handshake (see startup.go),
// which it does once.
func (s *Session) handle(msg *jsonrpc.Message, stream *Stream, waited bool) {
	s.touch()
	g := s.g
	reply := func(result json.RawMessage) { stream.push(jsonrpc.AppendResult(nil, msg.ID, result), true) }
	fail := func(err error) { stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true) }
	if g.draining.Load() {
		fail(jsonrpc.Errorf(CodeShuttingDown, "the gateway is shutting down"))
		return
	}
	if s.stateless && !stream.internal { // a composite's step is not the client's request
		stream.mu.Lock()
		stream.modern, stream.method = &g.modern, msg.Method
		stream.mu.Unlock()
		s.one.request = msg
		if s.gone(msg, stream) || s.retried(msg, stream) {
			return
		}
	}
	if msg.Method != "tools/call" { // checked with its name below, in the same pass
		if err := checkDecided(msg.Method, msg.Params, true); err != nil {
			s.ambiguous(msg.Method, err)
			fail(err)
			return
		}
	}
	cat := g.Catalog()
	switch msg.Method {
	case "server/discover":
		s.discover(msg, stream)
	case "subscriptions/listen":
		s.listen(msg, stream, cat)
	case "initialize":
		fail(jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the session is already initialized; start a new session to initialize again"))
	case "ping":
		reply(json.RawMessage(`{}`))
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		if !waited && s.awaitFirstList(msg, stream) {
			return
		}
		s.list(msg, stream, cat)
	case "tools/call":
		s.toolsCall(msg, stream, cat, true, waited)
	case "prompts/get":
		name, span, err := stringParam(msg.Params, "name")
		if err != nil {
			fail(err)
			return
		}
		prompt, ok := cat.Prompt(name)
		if !ok || !s.view().prompt(cat, name) {
			if ok {
				s.hidden(msg, stream, "prompt", access.Prompts, name)
			}
			fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown prompt %q", name))
			return
		}
		s.op(msg, stream).SetPrompt(name)
		s.forwardThen(msg, stream, prompt.Backend, renamed(msg.Params, span, name, prompt.Original), s.audited(msg, stream, prompt.Backend, "prompt", name))
	case "resources/read":
		uri, _, err := stringParam(msg.Params, "uri")
		if err != nil {
			fail(err)
			return
		}
		if g.readStatus(msg, stream, uri) {
			return
		}
		owner, original, ok := g.backendURI(cat, uri)
		if !ok || !s.view().resource(owner, uri) {
			if ok {
				s.hidden(msg, stream, "uri", access.Resources, uri)
			}
			fail(&jsonrpc.Error{Code: CodeResourceNotFound, Message: fmt.Sprintf("resource not found: no backend serves %q", uri),
				Data: append(jsonrpc.AppendString([]byte(`{"uri":`), uri), '}')})
			return
		}
		s.op(msg, stream).SetResource(uri)
		s.forwardThen(msg, stream, owner, withBackendURI(msg.Params, uri, original), s.audited(msg, stream, owner, "uri", uri))
	case "resources/subscribe", "resources/unsubscribe":
		s.subscription(msg, stream, cat)
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update":
		s.taskRequest(msg, stream)
	case "completion/complete":
		s.complete(msg, stream, cat)
	case "logging/setLevel":
		s.setLevel(msg, stream)
	default:
		// A method the gateway does not know cannot be checked against a
		// policy: only clients without restrictions may pass it on.
		if b := g.soleBackend(); b != nil && s.view().unrestricted() {
			s.forwardTo(msg, stream, b.Name(), msg.Params)
			return
		}
		fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", msg.Method))
	}
}

// toolsCall answers a tools/call; meta is whether the name may be one of
// the meta-tools of search mode (not for a call made through call_tool),
// and whether the call may wait for a backend in its first handshake (it
// has not, waited).
func (s *Session) toolsCall(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog, meta, waited bool) {
	fail := func(err error) { stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true) }
	// One pass over params: the checks of checkDecided, the name, and
	// what forwarding needs (see toolCallParams); none for a stateless
	// request, whose params the front's pass found them in.
	name, span, known, err := toolCallParams(msg.Params, s.headOf(msg.Params))
	if err != nil {
		if jsonrpc.AsError(err).Code == jsonrpc.CodeInvalidRequest {
			s.ambiguous(msg.Method, err)
		}
		fail(err)
		return
	}
	if meta && s.metaTool(msg, stream, cat, name) {
		return
	}
	tool, ok := cat.Tool(name)
	if !ok && meta && !waited && s.awaitStartingTool(msg, stream, name) {
		return // its backend is in its first handshake
	}
	if !ok || !s.allowsTool(cat, name) {
		if ok {
			s.hidden(msg, stream, "tool", access.Tools, name)
		} else if err := s.stillStarting(name); err != nil {
			fail(err)
			return
		}
		fail(s.unknownToolFor(cat, name))
		return
	}
	s.op(msg, stream).SetTool(name)
	// A call through call_tool carries the headers of call_tool, which
	// mirror none of the tool's parameters.
	if s.stateless && tool.ParamHeaders != nil && meta && !stream.internal {
		if err := checkParamHeaders(s.one.header, msg.Params, tool.ParamHeaders); err != nil {
			fail(err)
			return
		}
	}
	audit := s.audited(msg, stream, tool.Backend, "tool", name)
	if s.callLocal(msg, stream, tool, audit) {
		return
	}
	params := renamed(msg.Params, span, name, tool.Original)
	s.callTool(msg, stream, tool, params, known.renamed(params, span, tool.Original), audit)
}

// soleBackend returns the only healthy backend, where an unknown method can
// go without ambiguity, or nil.
func (g *Gateway) soleBackend() *backend.Backend {
	var only *backend.Backend
	for _, b := range g.registry.Backends() {
		if b.IsCLI() {
			continue // it has tools only, and answers nothing else
		}
		if _, server := b.Catalog(); server != nil {
			if only != nil {
				return nil
			}
			only = b
		}
	}
	return only
}

func stringParam(params json.RawMessage, key string) (string, jsonrpc.Span, error) {
	raw, span, ok := jsonrpc.Lookup(params, key)
	value, isString := jsonrpc.StringValue(raw)
	if !ok || !isString {
		return "", span, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params.%s must be a string", key)
	}
	return value, span, nil
}

// renamed rewrites the name member of params to the backend's own name.
func renamed(params json.RawMessage, span jsonrpc.Span, exposed, original string) json.RawMessage {
	if exposed == original {
		return params
	}
	return jsonrpc.Replace(params, span, jsonrpc.AppendString(nil, original))
}

func unknownTool(cat *catalog.Catalog, name string) error {
	msg := fmt.Sprintf("unknown tool %q", name)
	if near := cat.Closest(name, 3); len(near) > 0 {
		msg += "; did you mean " + quoteList(near) + "?"
	}
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s", msg)
}

func quoteList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}

// forwardTo sends the request to a backend under a fresh id, rewriting the
// progress token, and answers the client when the backend does.
func (s *Session) forwardTo(msg *jsonrpc.Message, stream *Stream, name string, params json.RawMessage) {
	s.forwardThen(msg, stream, name, params, nil)
}

// forwardThen is forwardTo, calling then with the outcome once the call
// ended: true if the backend answered with a result. Then is also called
// (with false) when the request could not be sent.
func (s *Session) forwardThen(msg *jsonrpc.Message, stream *Stream, name string, params json.RawMessage, then func(ok bool, size int)) {
	s.forwardVia(msg, stream, name, params, forwardedParams{}, then, nil)
}

// forwardVia is forwardThen for a call that fb, if not nil, may send to a
// fallback backend. The backend admits the call first: at once, or after
// a wait (start_wait, max_concurrent_calls) on a goroutine of its own.
func (s *Session) forwardVia(msg *jsonrpc.Message, stream *Stream, name string, params json.RawMessage, known forwardedParams, then func(ok bool, size int), fb *fallback) {
	b := s.g.registry.Backend(name)
	if b == nil {
		if then != nil {
			then(false, 0)
		}
		stream.push(jsonrpc.AppendError(nil, msg.ID, &jsonrpc.Error{Code: CodeBackendUnavailable, Message: fmt.Sprintf("backend %q was removed", name)}), true)
		return
	}
	if b.IsCLI() {
		s.forwardCLI(msg, stream, b, params, then, fb)
		return
	}
	if b.Pooled() {
		inst := s.boundInstance(b)
		if inst == nil {
			// Binding an instance may wait for one (pool_acquire_timeout).
			wait := s.admissionOp(msg, stream, b, "instance")
			go func() {
				inst, err := s.bindInstance(b)
				wait.EndErr(err)
				if err != nil {
					s.sendAdmitted(msg, stream, b, nil, err, params, known, then, fb)
					return
				}
				s.admit(msg, stream, inst, params, known, then, fb)
			}()
			return
		}
		b = inst // the session's own instance
	}
	s.admit(msg, stream, b, params, known, then, fb)
}

// admit has the backend (or instance) admit the call, waiting on a
// goroutine of its own if need be, and sends it.
func (s *Session) admit(msg *jsonrpc.Message, stream *Stream, b *backend.Backend, params json.RawMessage, known forwardedParams, then func(ok bool, size int), fb *fallback) {
	idle := s.g.opts.Telemetry.Tracing() && b.State() == backend.Idle // for the span of the wait
	b.Wake()                                                          // an idle backend starts on its first call (start = "on-demand")
	adm, err := b.Admit(context.Background(), false)
	if errors.Is(err, backend.ErrWouldWait) {
		// The wait counts as a request in flight, for Drain, and ends
		// when the client abandons the stream.
		ctx, cancel := context.WithCancel(context.Background())
		stream.onAbandon(cancel)
		s.g.inflight.Add(1)
		what := "queue"
		if idle || b.State() == backend.Starting {
			what = "start"
		}
		wait := s.admissionOp(msg, stream, b, what)
		go func() {
			defer s.g.callEnded()
			defer cancel()
			adm, err := b.Admit(ctx, true)
			wait.EndErr(err)
			s.sendAdmitted(msg, stream, b, adm, err, params, known, then, fb)
		}()
		return
	}
	s.sendAdmitted(msg, stream, b, adm, err, params, known, then, fb)
}

// sendAdmitted forwards a request the backend admitted, or answers with why it did
// not (or lets fb try a fallback).
func (s *Session) sendAdmitted(msg *jsonrpc.Message, stream *Stream, b *backend.Backend, adm *backend.Admission, admitErr error, params json.RawMessage, known forwardedParams, then func(ok bool, size int), fb *fallback) {
	s.sendAbout(msg, stream, b, adm, admitErr, params, known, then, fb, nil)
}

// sendAbout is sendAdmitted for a request about task tk (tasks_route.go),
// nil for any other.
func (s *Session) sendAbout(msg *jsonrpc.Message, stream *Stream, b *backend.Backend, adm *backend.Admission, admitErr error, params json.RawMessage, known forwardedParams, then func(ok bool, size int), fb *fallback, tk *task) {
	g := s.g
	name := b.Name()
	answer := func(code int, err error) {
		stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(asRPCError(code, err))), true)
	}
	fail := func(code int, err error) { // before the call is tracked
		if then != nil {
			then(false, 0)
		}
		answer(code, err)
	}
	var op *telemetry.Op
	if g.opts.Telemetry != nil {
		var conn *backend.Conn
		if adm != nil {
			conn = adm.Conn
		}
		if !known.of(params) {
			known = forwarded(params) // one pass over params, as below
		}
		op = s.clientOp(msg.ID, msg.Method, stream, b, conn, params, known, fb)
	}
	if admitErr != nil {
		op.Fail(telemetry.ErrUnavailable, admitCode(admitErr), admitErr.Error())
		if fb.try(s, b, admitErr) {
			if then != nil {
				then(false, 0)
			}
			return
		}
		if errors.Is(admitErr, backend.ErrNotRunning) {
			admitErr = unavailable(b)
		}
		fail(CodeBackendUnavailable, admitErr)
		return
	}
	conn := adm.Conn
	// The call's end also ends its admission (see call.finish).
	c := &call{sess: s, clientID: msg.ID, stream: stream, b: b, conn: conn, adm: adm, then: then, started: time.Now(), fb: fb}
	c.op.Store(op)
	if !known.of(params) {
		known = forwarded(params) // one pass over params
	}
	toolName, tok, span, hasToken := known.name, known.token, known.tokenSpan, known.hasToken
	if msg.Method == "tools/call" {
		c.tool = toolName // for the output pipeline
		c.creates = true
	}
	if tk != nil {
		c.aboutTask(msg.Method, tk)
	}
	if msg.Method == "resources/read" {
		c.viewURIs(msg.Params, params) // an App's view under its exposed URI
	}
	if hasToken {
		c.token = newToken()
		c.clientToken = tok
		params = jsonrpc.Replace(params, span, []byte(c.token))
		g.progress.Store(c.token, c)
	}
	key := string(msg.ID)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.forget()
		c.finish(false, 0)
		op.Fail(telemetry.ErrCancelled, CodeBackendUnavailable, "the session has ended")
		answer(CodeBackendUnavailable, errors.New("the session has ended"))
		return
	}
	if _, dup := s.calls[key]; dup {
		s.mu.Unlock()
		c.forget()
		c.finish(false, 0)
		op.Fail(strconv.Itoa(jsonrpc.CodeInvalidRequest), jsonrpc.CodeInvalidRequest, "request id already in use")
		answer(jsonrpc.CodeInvalidRequest, fmt.Errorf("request id %s is already in use by a request in flight", key))
		return
	}
	put(&s.calls, key, c)
	s.mu.Unlock()
	g.inflight.Add(1)
	stream.onAbandonCall(c)

	if s.stateless && s.logLevel >= 0 {
		g.requestLevel(conn, s.logLevel)
	}
	// A dual remote backend takes a stateless client's request in its era
	// (see backend.EraDual), a session's as a legacy backend would; but
	// every call to one that exchanges tokens stands alone, with its
	// caller's token: a session of the gateway's belongs to one identity
	// at a server that binds sessions to who opened them.
	modern := conn.Modern() || (s.stateless || b.Config().OAuthTokenExchange) && conn.Dual()
	c.modern = modern
	// A legacy backend gets a stateless request without the 2026-07-28
	// _meta (see legacy.go), cut out as the request is written.
	strip := !modern && s.stateless && known.meta != nil && bytes.Contains(known.meta, modernMetaPrefix)
	meta := known.metaSpan
	if strip && hasToken && span.Start >= meta.Start && span.End <= meta.End {
		meta.End += len(c.token) - (span.End - span.Start)
	}
	if modern {
		params = s.modernCall(c, msg.Method, jsonrpc.Compact(params))
	}
	ctx := &c.send // in the call: no allocation of its own
	ctx.deadline = c.started.Add(b.Config().Timeout)
	if b.Config().OAuthTokenExchange {
		ctx.caller = s.caller()
	}
	defer ctx.stop()
	if op != nil {
		// The backend's spans continue the trace: its _meta, and a remote
		// backend's headers (through ctx), name the op's span.
		ctx.trace = op.Context()
		if op.Sampled() {
			params = op.InjectMeta(jsonrpc.Compact(params))
			if strip { // the _meta grew: cut from where it is now
				if _, at, err := jsonrpc.Find(params, "_meta"); err == nil {
					meta = at
				}
			}
		}
	}
	// The callback may run before Go returns; c.bcall is only needed to
	// abandon the call, which can happen only after Go returned.
	var bcall *backend.Call
	var err error
	switch compact := jsonrpc.Compact(params); {
	case modern:
		bcall, err = conn.GoModern(ctx, msg.Method, compact, c, c.deliver)
	case strip && len(compact) == len(params):
		bcall, err = conn.GoWithout(ctx, msg.Method, compact, meta, c, c.deliver)
	case strip: // compacted, which moved the _meta
		bcall, err = conn.Go(ctx, msg.Method, jsonrpc.Compact(legacyRequestParams(params, params[meta.Start:meta.End], meta)), c, c.deliver)
	default:
		bcall, err = conn.Go(ctx, msg.Method, compact, c, c.deliver)
	}
	if err != nil {
		op.Fail(telemetry.ErrUnavailable, CodeBackendUnavailable, err.Error())
		if c.end() {
			if !fb.try(s, b, err) {
				if prefix := fmt.Sprintf("backend %q", name); !strings.HasPrefix(err.Error(), prefix) {
					err = fmt.Errorf("%s: %w", prefix, err) // most of Go's errors name the backend already
				}
				answer(CodeBackendUnavailable, err)
			}
			g.callEnded()
		}
		return
	}
	s.mu.Lock()
	c.bcall = bcall
	if !c.ended.Load() {
		c.armTimer()
	}
	unsent := c.unsent
	s.mu.Unlock()
	if unsent != "" {
		conn.Abandon(bcall, unsent) // cancelled while it was being sent
	}
}
