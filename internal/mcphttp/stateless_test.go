package mcphttp

import (
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
