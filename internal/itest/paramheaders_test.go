package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// A remote backend that speaks MCP 2026-07-28 (the Go SDK's server, which
// checks Mcp-Param-* headers as that revision demands) gets, with a
// stateless call of a tool that mirrors parameters into headers, the
// headers its own clients send: mcpgate is that server's client, and
// computes them from the arguments and the tool's inputSchema. Without
// them the server refuses the call with -32020. The server speaks both
// eras, so a 2025 session's call goes on mcpgate's session with it, in the
// 2025 era, which has no such headers.
func TestRemote2026BackendGetsParamHeaders(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "param-headers", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{
		Name: "route",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"region":{"type":"string","x-mcp-header":"Region"},"query":{"type":"string"}}}`),
	}, func(_ context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("routed to ", args["region"])}}}, nil, nil
	})
	var mu sync.Mutex
	var seen []string // Mcp-Param-Region of each tools/call
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			mu.Lock()
			seen = append(seen, r.Header.Get("Mcp-Param-Region"))
			mu.Unlock()
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	toml, url := testutil.Config(t, fmt.Sprintf("[backends.r]\nurl = %q\n", ts.URL))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})

	cs := connect2025(t, d.URL, nil)
	ctx := testutil.Context(t, 30e9)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "r__route", Arguments: map[string]any{"region": "eu-west", "query": "q"}})
	if err != nil || res.IsError {
		t.Fatalf("2025 session's call: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "routed to eu-west" {
		t.Errorf("the server answered %q", text)
	}

	const encoded = "=?base64?R3LDvMOfZSBhdXMgS8O2bG4=?=" // Grüße aus Köln
	_, body := exchange(t, http.DefaultClient, d.URL, statelessBody(2, "tools/call", `"name":"r__route","arguments":{"region":"Grüße aus Köln","query":"q"}`),
		append(statelessHeaders("", "tools/call", "r__route")[2:], "Mcp-Param-Region", encoded)...)
	if result, errMsg := statelessResult(t, body); errMsg != "" || fmt.Sprint(result["content"]) != "[map[text:routed to Grüße aus Köln type:text]]" {
		t.Errorf("stateless call: %s", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != encoded {
		t.Errorf("Mcp-Param-Region of the 2026-07-28 calls toward the server: %q, want only the stateless call's %q", seen, encoded)
	}
}
