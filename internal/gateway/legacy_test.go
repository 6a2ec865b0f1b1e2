package gateway

import (
	"encoding/json"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// What 2026-07-28 adds to a modern backend's results is gone from what a
// 2025 session gets; everything else is kept byte for byte.
func TestLegacyResult(t *testing.T) {
	const si = `"io.modelcontextprotocol/serverInfo":{"name":"context7","version":"4.1.1"}`
	for _, tc := range []struct{ in, want string }{
		{`{"content":[]}`, `{"content":[]}`},
		{`{"resultType":"complete","content":[{"type":"text","text":"a \"resultType\""}]}`, `{"content":[{"type":"text","text":"a \"resultType\""}]}`},
		{`{"resultType":"complete","_meta":{` + si + `},"content":[]}`, `{"content":[]}`},
		{`{"content":[],"_meta":{"x":1,` + si + `},"resultType":"complete"}`, `{"content":[],"_meta":{"x":1}}`},
		{`{"contents":[],"ttlMs":0,"cacheScope":"private","resultType":"complete"}`, `{"contents":[]}`},
		{`{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}},"content":[]}`, `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}},"content":[]}`},
		{`{"_meta":{},"_meta":{},"resultType":"complete"}`, `{"_meta":{},"_meta":{},"resultType":"complete"}`}, // ambiguous: left alone
	} {
		if got := legacyResult(json.RawMessage(tc.in)); string(got) != tc.want {
			t.Errorf("legacyResult(%s) = %s; want %s", tc.in, got, tc.want)
		}
	}
	p := `{"uri":"a://b","_meta":{"io.modelcontextprotocol/subscriptionId":7}}`
	if got := legacyParams(json.RawMessage(p)); string(got) != `{"uri":"a://b"}` {
		t.Errorf("legacyParams(%s) = %s", p, got)
	}
}

// A stateless request reaches a legacy backend without the _meta members
// of 2026-07-28, and with the others (a progress token) as they were.
func TestLegacyRequestParams(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"info"},"arguments":{}}`,
			`{"name":"echo","_meta":{},"arguments":{}}`},
		{`{"_meta":{"progressToken":"t1","io.modelcontextprotocol/protocolVersion":"2026-07-28","x":{"io.modelcontextprotocol/logLevel":1}},"name":"echo"}`,
			`{"_meta":{"progressToken":"t1","x":{"io.modelcontextprotocol/logLevel":1}},"name":"echo"}`},
		{`{"_meta":{"progressToken":"t1"},"name":"echo"}`, `{"_meta":{"progressToken":"t1"},"name":"echo"}`},
	} {
		f := forwarded(json.RawMessage(tc.in))
		if f.meta == nil {
			t.Fatalf("forwarded(%s) found no _meta", tc.in)
		}
		if got := legacyRequestParams(json.RawMessage(tc.in), f.meta, f.metaSpan); string(got) != tc.want {
			t.Errorf("legacyRequestParams(%s) = %s; want %s", tc.in, got, tc.want)
		}
	}
	// Renamed (a tool_prefix taken off), the span follows.
	in := json.RawMessage(`{"name":"pre__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	f := forwarded(in)
	_, span, _ := jsonrpc.Lookup(in, "name")
	out := renamed(in, span, "pre__echo", "echo")
	f = f.renamed(out, span, "echo")
	if got := legacyRequestParams(out, f.meta, f.metaSpan); string(got) != `{"name":"echo","_meta":{}}` {
		t.Errorf("renamed: %s", got)
	}
}
