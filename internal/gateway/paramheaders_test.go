package gateway_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

// A tool whose inputSchema mirrors parameters into Mcp-Param-* headers
// (x-mcp-header, MCP 2026-07-28): the gateway reads the body, so it checks
// each header against the argument it mirrors, as the revision demands of
// such a server, with the cases of the conformance scenario
// http-custom-header-server-validation.
func TestStatelessParamHeaders(t *testing.T) {
	tools := filepath.Join(t.TempDir(), "tools.json")
	schema := `[{"name":"route","inputSchema":{"type":"object","properties":{` +
		`"region":{"type":"string","x-mcp-header":"Region"},` +
		`"priority":{"type":"integer","x-mcp-header":"Priority"},` +
		`"verbose":{"type":"boolean","x-mcp-header":"Verbose"},` +
		`"where":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},` +
		`"query":{"type":"string"}},"required":["region","query"]}}]`
	if err := os.WriteFile(tools, []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startGateway(t, "", fakeBackend(t, "fake", "", "--tools-file", tools))
	meta := modernMeta(`{}`)
	call := func(args string) string {
		return modernBody(1, "tools/call", `"name":"fake__route","arguments":`+args, meta)
	}
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	with := func(more ...string) []string { return append(modernHeaders("tools/call", "fake__route"), more...) }
	cases := []struct {
		name   string
		body   string
		header []string
		status int
		code   int
	}{
		{"plain value", call(`{"region":"us-west1","query":"q"}`), with("Mcp-Param-Region", "us-west1"), 200, 0},
		{"header name in another case", call(`{"region":"us-west1","query":"q"}`), with("mcp-param-region", "us-west1"), 200, 0},
		{"base64 value", call(`{"region":"Hello","query":"q"}`), with("Mcp-Param-Region", b64("Hello")), 200, 0},
		{"non-ASCII value in base64", call(`{"region":"Hello, 世界","query":"q"}`), with("Mcp-Param-Region", b64("Hello, 世界")), 200, 0},
		{"no suffix: a literal", call(`{"region":"=?base64?SGVsbG8=","query":"q"}`), with("Mcp-Param-Region", "=?base64?SGVsbG8="), 200, 0},
		{"base64 text without the markers: a literal", call(`{"region":"SGVsbG8=","query":"q"}`), with("Mcp-Param-Region", "SGVsbG8="), 200, 0},
		{"integer compared as a number", call(`{"region":"r","priority":42,"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Priority", "42.0"), 200, 0},
		{"boolean", call(`{"region":"r","verbose":false,"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Verbose", "false"), 200, 0},
		{"nested property", call(`{"region":"r","where":{"zone":"z1"},"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Zone", "z1"), 200, 0},
		{"null value: no header expected", call(`{"region":"r","verbose":null,"query":"q"}`), with("Mcp-Param-Region", "r"), 200, 0},
		{"absent value: a header is not checked", call(`{"region":"r","query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Priority", "7"), 200, 0},
		{"unannotated parameter: its header is ignored", call(`{"region":"r","query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Query", "other"), 200, 0},
		{"header missing", call(`{"region":"us-west1","query":"q"}`), with(), 400, -32020},
		{"header differs", call(`{"region":"us-west1","query":"q"}`), with("Mcp-Param-Region", "eu"), 400, -32020},
		{"bad base64 padding", call(`{"region":"Hello","query":"q"}`), with("Mcp-Param-Region", "=?base64?SGVsbG8?="), 400, -32020},
		{"bad base64 characters", call(`{"region":"Hello","query":"q"}`), with("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?="), 400, -32020},
		{"header twice", call(`{"region":"r","query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Region", "r"), 400, -32020},
		{"integer differs", call(`{"region":"r","priority":42,"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Priority", "43"), 400, -32020},
		{"boolean differs", call(`{"region":"r","verbose":true,"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Verbose", "1"), 400, -32020},
		{"nested header missing", call(`{"region":"r","where":{"zone":"z1"},"query":"q"}`), with("Mcp-Param-Region", "r"), 400, -32020},
		// What the header mirrors must be one value for every parser: a
		// repeated or case-variant argument is refused, whichever copy
		// the header names.
		{"argument repeated", call(`{"region":"us","region":"eu","query":"q"}`), with("Mcp-Param-Region", "us"), 400, -32020},
		{"argument in another case", call(`{"region":"us","Region":"eu","query":"q"}`), with("Mcp-Param-Region", "us"), 400, -32020},
		{"only in another case", call(`{"Region":"eu","query":"q"}`), with("Mcp-Param-Region", "eu"), 400, -32020},
		{"nested argument repeated", call(`{"region":"r","where":{"zone":"z1","zone":"z2"},"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Zone", "z1"), 400, -32020},
		// Numbers are compared exactly, not as float64.
		{"integer beyond float64", call(`{"region":"r","priority":9007199254740993,"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Priority", "9007199254740992"), 400, -32020},
		{"integer with an exponent", call(`{"region":"r","priority":4.2e1,"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Priority", "42"), 200, 0},
		{"not a number", call(`{"region":"r","priority":42,"query":"q"}`), with("Mcp-Param-Region", "r", "Mcp-Param-Priority", "0x2a"), 400, -32020},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, m := modernCall(t, d.URL, c.body, c.header...)
			if status != c.status || errorCode(m) != c.code {
				t.Errorf("HTTP %d code %d, want HTTP %d code %d: %v", status, errorCode(m), c.status, c.code, m)
			}
		})
	}

	// A 2025 session has no such headers: its call goes through.
	sess := rawInit(t, d.URL, "2025-11-25", `{}`)
	resp := sess.post(t.Context(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fake__route","arguments":{"region":"r","query":"q"}}}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("session tools/call: HTTP %d", resp.StatusCode)
	}
}
