package mcphttp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Header names of the 2026-07-28 Streamable HTTP transport, which mirror
// parts of the body so that intermediaries can route without parsing it.
const (
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// Stateless is what the headers of a 2026-07-28 request say: the
// protocol version of its _meta, its method and, for tools/call,
// prompts/get and resources/read, the tool, prompt or resource.
type Stateless struct {
	Protocol string
	Method   string
	Name     string // "" where the method has none
}

// StatelessHeaders returns the headers of a 2026-07-28 request msg for
// protocol version: Mcp-Name carries params.name or params.uri as it is
// in msg, so a gateway that rewrote the name (stripped its prefix) sends
// the name the server knows.
func StatelessHeaders(protocol string, msg *jsonrpc.Message) Stateless {
	h := Stateless{Protocol: protocol, Method: msg.Method}
	key := ""
	switch msg.Method {
	case "tools/call", "prompts/get":
		key = "name"
	case "resources/read":
		key = "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		key = "taskId" // MCP Tasks: so intermediaries route a task's requests to its host
	}
	if key != "" {
		if v, _, ok := jsonrpc.Lookup(msg.Params, key); ok {
			h.Name, _ = jsonrpc.StringValue(v)
		}
	}
	return h
}

// HeaderValue encodes a value for Mcp-Name (or Mcp-Param-*): as is when
// it is plain visible ASCII, else in the =?base64?…?= form, which a value
// that looks like that form gets too.
func HeaderValue(v string) string {
	plain := v == strings.TrimSpace(v) && !(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; plain && i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			plain = false
		}
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

func (h Stateless) set(req *http.Request) {
	req.Header.Set(HeaderProtocol, h.Protocol)
	req.Header.Set(HeaderMethod, h.Method)
	if h.Name != "" || h.Method == "tools/call" || h.Method == "prompts/get" || h.Method == "resources/read" ||
		h.Method == "tasks/get" || h.Method == "tasks/update" || h.Method == "tasks/cancel" {
		req.Header.Set(HeaderName, HeaderValue(h.Name))
	}
}

// PostStateless POSTs a 2026-07-28 message, with no session and the
// headers h, and passes every message of the answer to deliver, as
// Exchange does. A refusal (HTTP 4xx or 5xx) whose body is a JSON-RPC
// response to one of ids is delivered like any answer: a modern server
// answers an unknown method with 404 and -32601, invalid params with 400.
func (c *Client) PostStateless(ctx context.Context, body []byte, h Stateless, ids []json.RawMessage, deliver func([]byte)) (missing []json.RawMessage, err error) {
	return c.PostStatelessParams(ctx, body, h, nil, ids, deliver)
}

// PostStatelessParams is PostStateless for a tools/call that also carries
// params in Mcp-Param-* headers (see MirroredParams).
func (c *Client) PostStatelessParams(ctx context.Context, body []byte, h Stateless, params []Param, ids []json.RawMessage, deliver func([]byte)) (missing []json.RawMessage, err error) {
	return c.PostStatelessRoom(ctx, body, h, params, ids, 0, func(buf []byte, at int) { deliver(buf[at:]) })
}

// PostStatelessRoom is PostStatelessParams for a caller that answers in
// place (see ReadAnswerRoom).
func (c *Client) PostStatelessRoom(ctx context.Context, body []byte, h Stateless, params []Param, ids []json.RawMessage, room int, deliver func(buf []byte, at int)) (missing []json.RawMessage, err error) {
	set := h.set
	if len(params) > 0 {
		set = func(req *http.Request) {
			h.set(req)
			setParams(req.Header, params)
		}
	}
	resp, err := c.doHeaders(ctx, c.opts.Endpoint, http.MethodPost, body, Session{}, "", nil, set)
	if err != nil {
		return ids, c.redact(err)
	}
	if resp.StatusCode/100 == 4 || resp.StatusCode/100 == 5 {
		err := HTTPError(resp, c.opts.Peer)
		resp.Body.Close()
		var rpcErr *jsonrpc.Error
		if e, ok := err.(*jsonrpc.Error); ok && len(ids) == 1 {
			rpcErr = e
		}
		if rpcErr != nil {
			deliver(jsonrpc.AppendError(nil, ids[0], rpcErr), 0)
			return nil, nil
		}
		return ids, c.redact(err)
	}
	missing, err = ReadAnswerRoom(resp, ids, c.opts.MaxMessageBytes, room, c.opts.Peer, deliver)
	return missing, c.redact(err)
}
