package front

import (
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

func TestDecodeHeaderValue(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"fake__echo", "fake__echo", true},
		{"file:///a b", "file:///a b", true},
		{"=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界", true},
		{"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?=", true},
		{"=?base64?!!?=", "", false},
		{"=?base64?/w==?=", "", false}, // not UTF-8
		{"caf\xc3\xa9", "", false},     // non-ASCII must be encoded
		{"a\x01b", "", false},
		{"=?BASE64?eA==?=", "=?BASE64?eA==?=", true}, // the markers are case-sensitive: a plain value
	} {
		got, ok := decodeHeaderValue(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("decodeHeaderValue(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzCheckModern: whatever headers and body a client sends, checkModern
// never panics; what it accepts has headers that agree with the body.
func FuzzCheckModern(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"a"}}`, "2026-07-28", "tools/call", "a")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"},"uri":"x:\u00e9"}}`, "2026-07-28", "resources/read", "=?base64?eDrDqQ==?=")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099"}}}`, "2099", "tools/list", "")
	f.Fuzz(func(t *testing.T, body, version, method, name string) {
		msg, err := jsonrpc.Parse([]byte(body))
		if err != nil {
			return
		}
		hdr := http.Header{}
		for k, v := range map[string]string{headerProtocol: version, headerMethod: method, headerName: name} {
			if v != "" {
				hdr.Set(k, v)
			}
		}
		head := gateway.ScanHead(msg.Params)
		meta, refused := checkModern(hdr, msg, &head)
		if refused != nil {
			if refused.status != http.StatusBadRequest {
				t.Fatalf("refused with HTTP %d", refused.status)
			}
			return
		}
		if meta.Protocol != version || !gateway.IsModernVersion(version) || method != msg.Method {
			t.Fatalf("accepted version %q (header %q), method %q (header %q)", meta.Protocol, version, msg.Method, method)
		}
		if member, ok := nameHeaderMethods[msg.Method]; ok {
			raw, _, _ := jsonrpc.Lookup(msg.Params, member)
			body, _ := jsonrpc.StringValue(raw)
			if decoded, _ := decodeHeaderValue(name); decoded != body {
				t.Fatalf("accepted Mcp-Name %q for params.%s %q", name, member, body)
			}
		}
	})
}

func BenchmarkCheckModern(b *testing.B) {
	msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}},"name":"s__echo","arguments":{"text":"hello"}}}`))
	hdr := http.Header{}
	hdr.Set(headerProtocol, "2026-07-28")
	hdr.Set(headerMethod, "tools/call")
	hdr.Set(headerName, "s__echo")
	b.ReportAllocs()
	for b.Loop() {
		if head := gateway.ScanHead(msg.Params); isModern(hdr, msg, &head) {
			checkModern(hdr, msg, &head)
		}
	}
}

// TestHeaderNamesCanonical checks that the header names get reads are in
// the canonical form the servers store them under: one that is not would
// never be found.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, key := range []string{headerSession, headerProtocol, headerMethod, headerName} {
		if c := http.CanonicalHeaderKey(key); c != key {
			t.Errorf("header name %q is not canonical (%q): get would miss it", key, c)
		}
	}
}
