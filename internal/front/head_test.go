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
		if !isModern(hdr, &head) {
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
