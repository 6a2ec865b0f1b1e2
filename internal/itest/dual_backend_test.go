package itest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Another mcpgate is a remote server of both eras (its server/discover
// lists 2026-07-28 and 2025-11-25): a dual backend. A 2025 session's call
// goes to it on the session it was initialized with, and the elicitation
// the call needs comes back as a request on that session; a 2026-07-28
// client's call goes to it without the session, in 2026-07-28, and gets
// the input_required result with the requestState of the server behind it
// unchanged, whose retry reaches that server untouched.
func TestDualBackendServesBothEras(t *testing.T) {
	inner := gateway(t, modernStdioBackend(t, "m"))
	upstream, seen := headerProxy(t, inner.URL)
	d, bus, _ := gatewayOnBus(t, fmt.Sprintf(`
[backends.a]
url = %q
tool_prefix = "a__"
`, upstream))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := bus.Backend(ctx, "a")
	if err != nil || st.Era != "dual" || st.ProtocolVersion != "2025-11-25" {
		t.Fatalf("backend a: era %q, protocol %q (%v); want dual, initialized with 2025-11-25", st.Era, st.ProtocolVersion, err)
	}

	// A 2025 session: the call goes on the session.
	var mu sync.Mutex
	var asked []string
	cs := connect2025(t, d.URL, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	before := len(seen.all())
	res := testutil.MustCallTool(t, cs, "a__m__confirm", map[string]any{"action": "deploy"})
	if got := testutil.ToolText(res); got != `confirmed deploy: {"ok":true} state round-1:deploy` {
		t.Errorf("a__m__confirm for a 2025 session = %q; want it confirmed with the session's answer", got)
	}
	mu.Lock()
	if fmt.Sprint(asked) != "[Really deploy?]" {
		t.Errorf("the session was asked %q; want the elicitation once", asked)
	}
	mu.Unlock()
	for _, h := range seen.all()[before:] {
		if h.Get("Mcp-Method") == "tools/call" || h.Get("Mcp-Session-Id") == "" {
			if h.Get("Mcp-Session-Id") == "" || h.Get("Mcp-Protocol-Version") != "2025-11-25" {
				t.Errorf("a 2025 session's request to a went with headers %v; want a's session and 2025-11-25", h)
			}
		}
	}

	// A 2026-07-28 client: the backend's own input_required result and
	// requestState, both ways, without the session.
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	before = len(seen.all())
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"a__m__confirm","arguments":{"action":"deploy"}}}`
	resp, answer := exchange(t, http.DefaultClient, d.URL, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "a__m__confirm")
	result, errMsg := statelessResult(t, answer)
	if resp.StatusCode != 200 || errMsg != "" || result["resultType"] != "input_required" || result["requestState"] != "round-1:deploy" {
		t.Fatalf("first round: HTTP %d %s; want the input_required result of the server behind a, its requestState unchanged", resp.StatusCode, answer)
	}
	retry := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + meta + `,"name":"a__m__confirm","arguments":{"action":"deploy"},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"round-1:deploy"}}`
	resp, answer = exchange(t, http.DefaultClient, d.URL, retry, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "a__m__confirm")
	result, errMsg = statelessResult(t, answer)
	content, _ := result["content"].([]any)
	if resp.StatusCode != 200 || errMsg != "" || len(content) != 1 || content[0].(map[string]any)["text"] != `confirmed deploy: {"ok":true} state round-1:deploy` {
		t.Fatalf("retry: HTTP %d %s; want the call confirmed", resp.StatusCode, answer)
	}
	calls := 0
	for _, h := range seen.all()[before:] {
		if h.Get("Mcp-Method") != "tools/call" {
			continue
		}
		calls++
		if h.Get("Mcp-Session-Id") != "" || h.Get("Mcp-Protocol-Version") != "2026-07-28" || h.Get("Mcp-Name") != "m__confirm" {
			t.Errorf("a 2026-07-28 client's call went to a with headers %v; want no session, 2026-07-28 and Mcp-Name m__confirm", h)
		}
	}
	if calls != 2 {
		t.Errorf("%d tools/call reached a for the 2026-07-28 client; want the call and its retry", calls)
	}
}
