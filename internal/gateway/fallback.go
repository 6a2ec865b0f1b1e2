package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// ServedByKey is the _meta member of a tool result served by a fallback:
// the backend that answered.
const ServedByKey = "io.mcpgate/servedBy"

// fallback is what a tools/call needs to go to another backend when its
// own cannot serve it: its circuit is open, it is stopped or failed, or its
// child died before answering. A call that got any part of an answer is
// never sent again: the tool's side effects must not happen twice.
type fallback struct {
	msg     *jsonrpc.Message
	stream  *Stream
	tool    string           // the tool's name at its backend
	called  string           // the name the client called it by
	primary *backend.Backend // the backend the catalog routes the tool to
	tried   map[string]bool
}

// callTool sends a tools/call to the tool's backend, with the backend's
// fallbacks standing by.
func (s *Session) callTool(msg *jsonrpc.Message, stream *Stream, tool *catalog.Entry, params json.RawMessage, known forwardedParams, then func(ok bool, size int)) {
	var fb *fallback
	if b := s.g.registry.Backend(tool.Backend); b != nil && len(b.Config().Fallback) > 0 {
		fb = &fallback{msg: msg, stream: stream, tool: tool.Original, called: tool.Name, primary: b, tried: map[string]bool{b.Name(): true}}
	}
	s.forwardVia(msg, stream, tool.Backend, params, known, then, fb)
}

// try sends the call to the first healthy fallback that has the tool and
// whose tool the session may use itself, if err allows a fallback. It
// reports whether it did; the caller then must not answer the client. The
// fallback's call is audited on its own, as its backend's: the primary's
// entry says it failed.
func (fb *fallback) try(s *Session, from *backend.Backend, err error) bool {
	if fb == nil || !canFallBack(err) {
		return false
	}
	cat := s.g.Catalog()
	for _, name := range fb.primary.Config().Fallback {
		if fb.tried[name] {
			continue
		}
		b := s.g.registry.Backend(name)
		if b == nil || b.State() != backend.Healthy {
			continue
		}
		entry := toolOf(cat, name, fb.tool)
		if entry == nil || !s.allowsTool(cat, entry.Name) {
			continue // a policy or profile that hides the fallback's tool hides it here too
		}
		fb.tried[name] = true
		_, span, ok := jsonrpc.Lookup(fb.msg.Params, "name")
		if !ok {
			return false
		}
		params := jsonrpc.Replace(fb.msg.Params, span, jsonrpc.AppendString(nil, entry.Original))
		fb.primary.CountFallback()
		s.g.log.InfoContext(s.op(fb.msg, fb.stream).Context(), "tools/call sent to a fallback backend", "backend", from.Name(), "fallback", name, "tool", fb.tool, "reason", err.Error(),
			"client", s.Client().Name, "identity", s.identity, journal.MessageFallback.Attr())
		s.forwardVia(fb.msg, fb.stream, name, params, forwardedParams{}, s.audited(fb.msg, fb.stream, name, "tool", fb.called), fb)
		return true
	}
	return false
}

// answering marks the calls of sess on conn as partly answered: the
// backend asked the client something for one of them (which one, the
// request does not say), so none of them may be sent again.
func answering(conn *backend.Conn, sess *Session) {
	conn.Calls(func(bc *backend.Call) {
		if c, ok := bc.Owner.(*call); ok && c.sess == sess {
			c.answering.Store(true)
		}
	})
}

// canFallBack reports whether a call that ended with err may go to a
// fallback: the backend refused it for its open circuit, is not running,
// or died before any answer.
func canFallBack(err error) bool {
	var refused *backend.RefusedError
	switch {
	case errors.As(err, &refused):
		return !refused.Busy && refused.State == backend.Unhealthy
	case errors.Is(err, backend.ErrNotRunning), errors.Is(err, backend.ErrGone):
		return true
	}
	return false
}

// toolOf finds the tool a backend has under its own name.
func toolOf(cat *catalog.Catalog, backendName, original string) *catalog.Entry {
	for i := range cat.Tools {
		if e := &cat.Tools[i]; e.Backend == backendName && e.Original == original {
			return e
		}
	}
	return nil
}

// servedBy marks the result of a call that a fallback served with the
// backend that answered.
func (c *call) servedBy(result json.RawMessage) json.RawMessage {
	if c.fb == nil || c.b == c.fb.primary {
		return result
	}
	return servedBy(result, c.b.Name())
}

// servedBy marks result as served by the backend name.
func servedBy(result json.RawMessage, name string) json.RawMessage {
	member := jsonrpc.AppendString(append(jsonrpc.AppendString(nil, ServedByKey), ':'), name)
	if meta, span, ok := jsonrpc.Lookup(result, "_meta"); ok && len(meta) > 1 && meta[0] == '{' {
		return jsonrpc.Replace(result, span, prependMember(meta, member))
	}
	if len(result) < 2 || result[0] != '{' {
		return result
	}
	return prependMember(result, append(append([]byte(`"_meta":{`), member...), '}'))
}

// prependMember inserts member as the first member of the JSON object obj.
func prependMember(obj, member []byte) []byte {
	out := append(append([]byte{'{'}, member...), obj[1:]...)
	if rest := bytes.TrimLeft(obj[1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(append(append([]byte{'{'}, member...), ','), obj[1:]...)
	}
	return out
}

// asRPCError turns an error of the call path into the JSON-RPC error the
// client gets: a refusal carries {backend, state, retryAfterMs} as data.
func asRPCError(code int, err error) error {
	var refused *backend.RefusedError
	if !errors.As(err, &refused) {
		return &jsonrpc.Error{Code: code, Message: err.Error()}
	}
	if refused.Busy {
		code = CodeBackendBusy
	}
	data := jsonrpc.AppendString([]byte(`{"backend":`), refused.Backend)
	data = jsonrpc.AppendString(append(data, `,"state":`...), refused.State.String())
	data = append(strconv.AppendInt(append(data, `,"retryAfterMs":`...), refused.RetryAfter.Milliseconds(), 10), '}')
	return &jsonrpc.Error{Code: code, Message: refused.Msg, Data: data}
}
