package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// call is a client's request forwarded to a backend.
type call struct {
	sess     *Session
	clientID json.RawMessage
	stream   *Stream
	b        *backend.Backend
	conn     *backend.Conn
	bcall    *backend.Call
	timer    *time.Timer

	token       int64           // our progress token toward the backend, 0 if none
	clientToken json.RawMessage // the client's progress token
	unsent      string          // why the call was given up before bcall was set; guarded by sess.mu

	// then, if set, learns whether the backend accepted the request once
	// the call ends.
	then      func(ok bool)
	succeeded atomic.Bool

	ended atomic.Bool
	once  sync.Once // guards the bookkeeping in end
}

// HandleRequest answers a request from the client. The answer, and any
// message that belongs to the request before it, is pushed on stream;
// HandleRequest itself does not wait for backends.
func (s *Session) HandleRequest(msg *jsonrpc.Message, stream *Stream) {
	s.touch()
	g := s.g
	reply := func(result json.RawMessage) { stream.push(jsonrpc.AppendResult(nil, msg.ID, result), true) }
	fail := func(err error) { stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true) }
	if g.draining.Load() {
		fail(jsonrpc.Errorf(CodeShuttingDown, "the gateway is shutting down"))
		return
	}
	cat := g.Catalog()
	switch msg.Method {
	case "initialize":
		fail(jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the session is already initialized; start a new session to initialize again"))
	case "ping":
		reply(json.RawMessage(`{}`))
	case "tools/list":
		s.page(msg, stream, "tools", len(cat.Tools), func(i int) []byte { return cat.Tools[i].Raw })
	case "prompts/list":
		s.page(msg, stream, "prompts", len(cat.Prompts), func(i int) []byte { return cat.Prompts[i].Raw })
	case "resources/list":
		s.page(msg, stream, "resources", len(cat.Resources), func(i int) []byte { return cat.Resources[i].Raw })
	case "resources/templates/list":
		s.page(msg, stream, "resourceTemplates", len(cat.Templates), func(i int) []byte { return cat.Templates[i].Raw })
	case "tools/call":
		name, span, err := stringParam(msg.Params, "name")
		if err != nil {
			fail(err)
			return
		}
		tool, ok := cat.Tool(name)
		if !ok {
			fail(unknownTool(cat, name))
			return
		}
		s.forwardTo(msg, stream, tool.Backend, renamed(msg.Params, span, name, tool.Original))
	case "prompts/get":
		name, span, err := stringParam(msg.Params, "name")
		if err != nil {
			fail(err)
			return
		}
		prompt, ok := cat.Prompt(name)
		if !ok {
			fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown prompt %q", name))
			return
		}
		s.forwardTo(msg, stream, prompt.Backend, renamed(msg.Params, span, name, prompt.Original))
	case "resources/read":
		uri, _, err := stringParam(msg.Params, "uri")
		if err != nil {
			fail(err)
			return
		}
		owner, ok := g.resourceOwner(cat, uri)
		if !ok {
			fail(&jsonrpc.Error{Code: CodeResourceNotFound, Message: fmt.Sprintf("resource not found: no backend serves %q", uri),
				Data: append(jsonrpc.AppendString([]byte(`{"uri":`), uri), '}')})
			return
		}
		s.forwardTo(msg, stream, owner, msg.Params)
	case "resources/subscribe", "resources/unsubscribe":
		s.subscription(msg, stream, cat)
	case "completion/complete":
		s.complete(msg, stream, cat)
	case "logging/setLevel":
		s.setLevel(msg, stream)
	default:
		if b := g.soleBackend(); b != nil {
			s.forwardTo(msg, stream, b.Name(), msg.Params)
			return
		}
		fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", msg.Method))
	}
}

// soleBackend returns the only healthy backend, where an unknown method can
// go without ambiguity, or nil.
func (g *Gateway) soleBackend() *backend.Backend {
	var only *backend.Backend
	for _, b := range g.registry.Backends() {
		if b.Conn() != nil {
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
func (s *Session) forwardThen(msg *jsonrpc.Message, stream *Stream, name string, params json.RawMessage, then func(ok bool)) {
	g := s.g
	answer := func(code int, err error) {
		stream.push(jsonrpc.AppendError(nil, msg.ID, &jsonrpc.Error{Code: code, Message: err.Error()}), true)
	}
	fail := func(code int, err error) { // before the call is tracked
		if then != nil {
			then(false)
		}
		answer(code, err)
	}
	b := g.registry.Backend(name)
	if b == nil {
		fail(CodeBackendUnavailable, fmt.Errorf("backend %q was removed", name))
		return
	}
	conn := b.Conn()
	if conn == nil {
		fail(CodeBackendUnavailable, unavailable(b))
		return
	}
	c := &call{sess: s, clientID: msg.ID, stream: stream, b: b, conn: conn, then: then}
	if tok, span, ok := jsonrpc.LookupPath(params, "_meta", "progressToken"); ok {
		c.token = g.tokens.Add(1)
		c.clientToken = tok
		params = jsonrpc.Replace(params, span, strconv.AppendInt(nil, c.token, 10))
		g.progress.Store(c.token, c)
	}
	key := string(msg.ID)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.forget()
		fail(CodeBackendUnavailable, errors.New("the session has ended"))
		return
	}
	if _, dup := s.calls[key]; dup {
		s.mu.Unlock()
		c.forget()
		fail(jsonrpc.CodeInvalidRequest, fmt.Errorf("request id %s is already in use by a request in flight", key))
		return
	}
	s.calls[key] = c
	s.mu.Unlock()
	g.inflight.Add(1)
	stream.onAbandon(func() {
		c.cancel("the client disconnected")
		s.StreamDone(stream)
	})

	timeout := b.Config().Timeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The callback may run before Go returns; c.bcall is only needed to
	// abandon the call, which can happen only after Go returned.
	bcall, err := conn.Go(ctx, msg.Method, jsonrpc.Compact(params), c, c.deliver)
	if err != nil {
		if c.end() {
			answer(CodeBackendUnavailable, fmt.Errorf("backend %q: %v", name, err))
		}
		return
	}
	s.mu.Lock()
	c.bcall = bcall
	c.timer = time.AfterFunc(timeout, func() { c.timedOut(timeout) })
	unsent := c.unsent
	s.mu.Unlock()
	if unsent != "" {
		conn.Abandon(bcall, unsent) // cancelled while it was being sent
	}
	if c.ended.Load() {
		c.timer.Stop()
	}
}

// deliver receives the backend's answer, on the backend's reader goroutine.
func (c *call) deliver(resp *jsonrpc.Message, err error) {
	c.succeeded.Store(err == nil && resp.Error == nil)
	if !c.end() {
		return
	}
	switch {
	case errors.Is(err, backend.ErrTooLarge):
		c.stream.push(errorResponse(c.clientID, CodeMessageTooLarge, "%v", err), true)
	case err != nil:
		c.stream.push(errorResponse(c.clientID, CodeBackendUnavailable, "%v", err), true)
	case resp.Error != nil:
		c.stream.push(jsonrpc.AppendRawError(nil, c.clientID, resp.Error), true)
	default:
		c.stream.push(jsonrpc.AppendResult(nil, c.clientID, resp.Result), true)
	}
}

func (c *call) timedOut(timeout time.Duration) {
	if c.bcall == nil || !c.conn.Abandon(c.bcall, "timed out in mcpgate") {
		return
	}
	if c.end() {
		c.stream.push(errorResponse(c.clientID, CodeTimeout, "backend %q did not answer %s within %s (timeout; see the backend's timeout setting)",
			c.b.Name(), c.bcall.Method, timeout), true)
	}
	c.b.Probe(c.conn)
}

// cancel gives up on the call for the client: the backend is told, a late
// response is dropped, and the client's stream ends without an answer.
func (c *call) cancel(reason string) {
	if c.giveUp(reason) && c.end() {
		c.stream.drop()
	}
}

// giveUp abandons the backend's request. It reports false if the backend
// answered meanwhile. A request still being sent is abandoned by forwardTo
// as soon as it is.
func (c *call) giveUp(reason string) bool {
	c.sess.mu.Lock()
	bcall := c.bcall
	if bcall == nil {
		c.unsent = reason
	}
	c.sess.mu.Unlock()
	return bcall == nil || c.conn.Abandon(bcall, reason)
}

// abort gives up on the call like cancel, but answers the client with an
// error of code saying why.
func (c *call) abort(code int, why string) {
	if !c.giveUp(why) {
		return // answered meanwhile
	}
	if c.end() {
		c.stream.push(errorResponse(c.clientID, code, "%s", why), true)
	}
}

// end does the bookkeeping of a finished call once. It reports whether this
// was the first end, i.e. whether the caller should answer the client.
func (c *call) end() bool {
	if c.ended.Swap(true) {
		return false
	}
	c.once.Do(func() {
		if c.then != nil {
			defer c.then(c.succeeded.Load())
		}
		s := c.sess
		s.mu.Lock()
		if s.calls[string(c.clientID)] == c {
			delete(s.calls, string(c.clientID))
		}
		if c.timer != nil {
			c.timer.Stop()
		}
		s.mu.Unlock()
		c.forget()
		s.g.callEnded()
	})
	return true
}

// forget drops the call's progress token.
func (c *call) forget() {
	if c.token != 0 {
		c.sess.g.progress.Delete(c.token)
	}
}

// page answers a list request with one page of the catalog.
func (s *Session) page(msg *jsonrpc.Message, stream *Stream, key string, n int, item func(int) []byte) {
	start := 0
	if raw, _, ok := jsonrpc.Lookup(msg.Params, "cursor"); ok && string(raw) != "null" {
		var err error
		if start, err = decodeCursor(raw, n); err != nil {
			stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid cursor: %v", err)), true)
			return
		}
	}
	end := min(start+s.g.opts.PageSize, n)
	out := append([]byte(`{"`), key...)
	out = append(out, `":[`...)
	for i := start; i < end; i++ {
		if i > start {
			out = append(out, ',')
		}
		out = append(out, item(i)...)
	}
	out = append(out, ']')
	if end < n {
		out = append(out, `,"nextCursor":`...)
		out = jsonrpc.AppendString(out, encodeCursor(end))
	}
	out = append(out, '}')
	stream.push(jsonrpc.AppendResult(nil, msg.ID, out), true)
}

func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("mcpgate:" + strconv.Itoa(offset)))
}

func decodeCursor(raw json.RawMessage, n int) (int, error) {
	text, ok := jsonrpc.StringValue(raw)
	if !ok {
		return 0, errors.New("not a string")
	}
	b, err := base64.RawURLEncoding.DecodeString(text)
	rest, found := strings.CutPrefix(string(b), "mcpgate:")
	if err != nil || !found {
		return 0, errors.New("not a cursor this gateway issued")
	}
	offset, err := strconv.Atoi(rest)
	if err != nil || offset < 0 || offset > n {
		return 0, errors.New("out of range; the list may have changed, start again without a cursor")
	}
	return offset, nil
}

// subscription handles resources/subscribe and resources/unsubscribe: the
// owning backend is subscribed while at least one session is.
func (s *Session) subscription(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog) {
	uri, _, err := stringParam(msg.Params, "uri")
	if err != nil {
		stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true)
		return
	}
	subscribe := msg.Method == "resources/subscribe"
	s.mu.Lock()
	owner, had := s.subs[uri]
	s.mu.Unlock()
	if subscribe {
		if had {
			stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
			return
		}
		var ok bool
		if owner, ok = s.g.resourceOwner(cat, uri); !ok {
			stream.push(errorResponse(msg.ID, CodeResourceNotFound, "resource not found: no backend serves %q", uri), true)
			return
		}
	} else if !had {
		stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
		return
	}
	g := s.g
	g.subsMu.Lock()
	k := subKey{owner, uri}
	first := subscribe && g.subs[k] == 0
	last := !subscribe && g.subs[k] == 1
	if subscribe {
		g.subs[k]++
	} else if g.subs[k]--; g.subs[k] <= 0 {
		delete(g.subs, k)
	}
	g.subsMu.Unlock()
	s.mu.Lock()
	if subscribe {
		s.subs[uri] = owner
	} else {
		delete(s.subs, uri)
	}
	s.mu.Unlock()
	if first {
		// A backend that refuses the subscription must not stay counted.
		s.forwardThen(msg, stream, owner, msg.Params, func(ok bool) {
			if !ok {
				s.mu.Lock()
				delete(s.subs, uri)
				s.mu.Unlock()
				g.unsubscribeCount(k)
			}
		})
		return
	}
	if last {
		s.forwardTo(msg, stream, owner, msg.Params)
		return
	}
	stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
}

// unsubscribeCount forgets one session's subscription to k and reports
// whether it was the last.
func (g *Gateway) unsubscribeCount(k subKey) (last bool) {
	g.subsMu.Lock()
	defer g.subsMu.Unlock()
	g.subs[k]--
	if g.subs[k] > 0 {
		return false
	}
	delete(g.subs, k)
	return true
}

// resourceOwner returns the backend serving uri: the one that lists it or
// a template matching it, else the only backend with resources at all, as
// servers may serve URIs they do not list.
func (g *Gateway) resourceOwner(cat *catalog.Catalog, uri string) (string, bool) {
	if owner, ok := cat.ResourceOwner(uri); ok {
		return owner, true
	}
	only := ""
	for _, b := range g.registry.Backends() {
		if conn := b.Conn(); conn != nil && conn.Server().Capabilities.Resources != nil {
			if only != "" {
				return "", false
			}
			only = b.Name()
		}
	}
	return only, only != ""
}

// unsubscribe drops one session's subscription when it ends.
func (g *Gateway) unsubscribe(owner, uri string) {
	if !g.unsubscribeCount(subKey{owner, uri}) {
		return
	}
	if b := g.registry.Backend(owner); b != nil {
		if conn := b.Conn(); conn != nil {
			params := append(jsonrpc.AppendString([]byte(`{"uri":`), uri), '}')
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			conn.Go(ctx, "resources/unsubscribe", params, nil, func(*jsonrpc.Message, error) {})
		}
	}
}

// complete routes completion/complete by the prompt or resource it refers to.
func (s *Session) complete(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog) {
	fail := func(format string, args ...any) {
		stream.push(errorResponse(msg.ID, jsonrpc.CodeInvalidParams, format, args...), true)
	}
	ref, refSpan, ok := jsonrpc.Lookup(msg.Params, "ref")
	if !ok {
		fail("params.ref is missing")
		return
	}
	refType, _, _ := stringParam(ref, "type")
	switch refType {
	case "ref/prompt":
		name, span, err := stringParam(ref, "name")
		if err != nil {
			fail("params.ref.name must be a string")
			return
		}
		prompt, ok := cat.Prompt(name)
		if !ok {
			fail("unknown prompt %q", name)
			return
		}
		newRef := renamed(ref, span, name, prompt.Original)
		s.forwardTo(msg, stream, prompt.Backend, jsonrpc.Replace(msg.Params, refSpan, newRef))
	case "ref/resource":
		uri, _, err := stringParam(ref, "uri")
		if err != nil {
			fail("params.ref.uri must be a string")
			return
		}
		for _, t := range cat.Templates {
			if t.URI == uri {
				s.forwardTo(msg, stream, t.Backend, msg.Params)
				return
			}
		}
		if owner, ok := cat.ResourceOwner(uri); ok {
			s.forwardTo(msg, stream, owner, msg.Params)
			return
		}
		fail("no backend serves the resource or template %q", uri)
	default:
		fail("params.ref.type must be ref/prompt or ref/resource")
	}
}

// Syslog priorities of MCP's log levels.
var logLevels = map[string]int{"debug": 7, "info": 6, "notice": 5, "warning": 4, "error": 3, "critical": 2, "alert": 1, "emergency": 0}

// LogPriority maps an MCP log level to its syslog priority; ok is false for
// an unknown level.
func LogPriority(level string) (int, bool) {
	p, ok := logLevels[level]
	return p, ok
}

// setLevel records the session's log level and passes it on to every
// backend that logs.
func (s *Session) setLevel(msg *jsonrpc.Message, stream *Stream) {
	level, _, err := stringParam(msg.Params, "level")
	prio, ok := logLevels[level]
	if err != nil || !ok {
		stream.push(errorResponse(msg.ID, jsonrpc.CodeInvalidParams, "params.level must be one of debug, info, notice, warning, error, critical, alert, emergency"), true)
		return
	}
	s.mu.Lock()
	s.logLevel = prio
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range s.g.registry.Backends() {
		conn := b.Conn()
		if conn == nil || conn.Server().Capabilities.Logging == nil {
			continue
		}
		wg.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), b.Config().Timeout)
		if _, err := conn.Go(ctx, msg.Method, jsonrpc.Compact(msg.Params), nil, func(*jsonrpc.Message, error) { cancel(); wg.Done() }); err != nil {
			cancel()
			wg.Done()
		}
	}
	go func() {
		wg.Wait()
		stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
	}()
}

// notifyAll sends a notification to each given backend that is running,
// waiting at most a second for each one's input to take it.
func notifyAll(backends []*backend.Backend, method string, params json.RawMessage) {
	for _, b := range backends {
		if conn := b.Conn(); conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Notify(ctx, method, params)
			cancel()
		}
	}
}
