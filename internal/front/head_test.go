package front

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Allocation budget of the stateless head check: telling a stateless
// tools/call from a session's and checking its headers against its body
// takes one pass over params and allocates nothing.
func TestStatelessHeadAllocationBudget(t *testing.T) {
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}},` +
		`"name":"s__echo","arguments":{"text":"` + strings.Repeat("x", 1024) + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{}
	hdr.Set(headerProtocol, "2026-07-28")
	hdr.Set(headerMethod, "tools/call")
	hdr.Set(headerName, "s__echo")
	const budget = 0
	got := testing.AllocsPerRun(100, func() {
		head := gateway.ScanHead(msg.Params)
		if !isModern(hdr, msg, &head) {
			t.Fatal("not seen as stateless")
		}
		if _, refused := checkModern(hdr, msg, &head); refused != nil {
			t.Fatal(refused.err)
		}
	})
	if got > budget {
		t.Errorf("the stateless head check allocates %.1f times, over its budget of %d", got, budget)
	}
}

func TestEqualString(t *testing.T) {
	for _, c := range []struct {
		raw, s string
		want   bool
	}{
		{`"s__echo"`, "s__echo", true},
		{`"s__echo"`, "s__echO", false},
		{`"a\u0041"`, "aA", true},
		{`"a\u0041"`, `a\u0041`, false}, // the header's bytes are the body's, but not its value
		{`"caf\u00e9"`, "café", true},
		{`"café"`, "café", true},
		{`17`, "17", false},
		{``, "", false},
	} {
		if got := equalString([]byte(c.raw), c.s); got != c.want {
			t.Errorf("equalString(%s, %q) = %v, want %v", c.raw, c.s, got, c.want)
		}
	}
}

// Which POSTs without a session are stateless: those with 2026-07-28's
// _meta version or header, an initialize too (it gets 404), and
// ambiguous params, except in an initialize, which starts a 2025 session
// as it always did.
func TestIsModern(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	init := `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}`
	for _, c := range []struct {
		name, method, params, header string
		want                         bool
	}{
		{"2025 initialize", "initialize", init, "", false},
		{"2025 initialize with a 2025 header", "initialize", init, "2025-11-25", false},
		{"2025 initialize with ambiguous params", "initialize", init + `,"uri":"a","uri":"b"`, "", false},
		{"initialize with 2026 _meta", "initialize", init + "," + meta, "", true},
		{"initialize with the 2026 header", "initialize", init, "2026-07-28", true},
		{"stateless call", "tools/call", meta + `,"name":"x"`, "2026-07-28", true},
		{"ambiguous params", "tools/call", `"name":"x","name":"y"`, "", true},
		{"no _meta, no header", "tools/list", `"cursor":"c"`, "", false},
	} {
		msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + c.method + `","params":{` + c.params + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		hdr := http.Header{}
		if c.header != "" {
			hdr.Set(headerProtocol, c.header)
		}
		head := gateway.ScanHead(msg.Params)
		if got := isModern(hdr, msg, &head); got != c.want {
			t.Errorf("%s: isModern = %v, want %v", c.name, got, c.want)
		}
	}
}
