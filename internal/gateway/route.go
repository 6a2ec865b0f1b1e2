package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

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
	conn, wait := s.connFor(b)
	switch {
	case conn == nil && wait == nil:
		fail(CodeBackendUnavailable, unavailable(b))
		return
	case conn == nil:
		// Starting a backend or binding an instance takes a while: the
		// request goes on once it is done, without holding up the client.
		go func() {
			conn, err := wait()
			if err != nil {
				fail(CodeBackendUnavailable, err)
				return
			}
			s.forwardOn(msg, stream, b, conn, params, then)
		}()
		return
	}
	s.forwardOn(msg, stream, b, conn, params, then)
}

// forwardOn is forwardThen once the connection is known.
func (s *Session) forwardOn(msg *jsonrpc.Message, stream *Stream, b *backend.Backend, conn *backend.Conn, params json.RawMessage, then func(ok bool)) {
	g := s.g
	name := b.Name()
	answer := func(code int, err error) {
		stream.push(jsonrpc.AppendError(nil, msg.ID, &jsonrpc.Error{Code: code, Message: err.Error()}), true)
	}
	fail := func(code int, err error) { // before the call is tracked
		if then != nil {
			then(false)
		}
		answer(code, err)
	}
	c := &call{sess: s, clientID: msg.ID, stream: stream, b: b, conn: conn, then: then, started: time.Now()}
	if tok, span, ok := jsonrpc.LookupPath(params, "_meta", "progressToken"); ok {
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

	ctx, cancel := context.WithTimeout(context.Background(), b.Config().Timeout)
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
	c.armTimer()
	unsent := c.unsent
	s.mu.Unlock()
	if unsent != "" {
		conn.Abandon(bcall, unsent) // cancelled while it was being sent
	}
	if c.ended.Load() {
		c.timer.Stop()
	}
}
