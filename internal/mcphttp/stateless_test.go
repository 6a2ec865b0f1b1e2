package mcphttp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Mcp-Name carries the name or URI of the body as the server knows it,
// in the =?base64?…?= form when it is not plain visible ASCII or looks
// like that form.
func TestStatelessHeaders(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want Stateless
		name string // the Mcp-Name header value
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather"}}`, Stateless{ModernVersion, "tools/call", "get_weather"}, "get_weather"},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"Grüße"}}`, Stateless{ModernVersion, "prompts/get", "Grüße"}, "=?base64?R3LDvMOfZQ==?="},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a b"}}`, Stateless{ModernVersion, "resources/read", "file:///a b"}, "file:///a b"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":" padded "}}`, Stateless{ModernVersion, "tools/call", " padded "}, "=?base64?IHBhZGRlZCA=?="},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"=?base64?literal?="}}`, Stateless{ModernVersion, "tools/call", "=?base64?literal?="}, "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"line1\nline2"}}`, Stateless{ModernVersion, "tools/call", "line1\nline2"}, "=?base64?bGluZTEKbGluZTI=?="},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"ignored"}}`, Stateless{ModernVersion, "tools/list", ""}, ""},
	} {
		msg, err := jsonrpc.Parse([]byte(tc.msg))
		if err != nil {
			t.Fatal(err)
		}
		got := StatelessHeaders(ModernVersion, msg)
		if got != tc.want {
			t.Errorf("StatelessHeaders(%s) = %+v, want %+v", tc.msg, got, tc.want)
		}
		if got.Name != "" {
			if v := HeaderValue(got.Name); v != tc.name {
				t.Errorf("HeaderValue(%q) = %q, want %q", got.Name, v, tc.name)
			}
		}
	}
}

// ModernVersion is the version these tests send.
const ModernVersion = "2026-07-28"

// A 2026-07-28 server refuses with an HTTP error and a JSON-RPC error in
// the body (404 and -32601 for an unknown method): the caller gets that
// error as the response to its request, not a transport failure; a
// refusal without one is an error. No session id is ever sent.
func TestPostStatelessRefusals(t *testing.T) {
	var sessions atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderSession) != "" {
			sessions.Add(1)
		}
		switch r.Header.Get(HeaderMethod) {
		case "nope/nothing":
			w.Header().Set("Content-Type", MediaJSON)
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}`)
		default:
			http.Error(w, "broken", http.StatusBadGateway)
		}
	}))
	defer ts.Close()
	c := NewClient(Options{Endpoint: ts.URL})
	var got []string
	deliver := func(b []byte) { got = append(got, string(b)) }
	msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":7,"method":"nope/nothing"}`))
	missing, err := c.PostStateless(context.Background(), []byte(`{"jsonrpc":"2.0","id":7,"method":"nope/nothing"}`), StatelessHeaders(ModernVersion, msg), []json.RawMessage{msg.ID}, deliver)
	if err != nil || missing != nil || len(got) != 1 || !strings.Contains(got[0], `"id":7`) || !strings.Contains(got[0], `-32601`) {
		t.Errorf("404 with -32601: delivered %q, missing %q, err %v; want the error as the response", got, missing, err)
	}
	got = nil
	msg, _ = jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`))
	missing, err = c.PostStateless(context.Background(), []byte(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`), StatelessHeaders(ModernVersion, msg), []json.RawMessage{msg.ID}, deliver)
	if err == nil || len(missing) != 1 || len(got) != 0 {
		t.Errorf("502 without JSON-RPC: delivered %q, missing %q, err %v; want an error", got, missing, err)
	}
	if n := sessions.Load(); n != 0 {
		t.Errorf("%d requests carried a session id", n)
	}
}
