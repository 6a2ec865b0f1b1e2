package itest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestMalformedClients sends what broken or hostile clients send, each
// getting the HTTP status and JSON-RPC error MCP's Streamable HTTP
// transport and JSON-RPC 2.0 name, while a well-behaved session keeps
// being served throughout: by a loop of calls running all along, and by a
// call after every case.
func TestMalformedClients(t *testing.T) {
	d := gateway(t, "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	other := &rawClient{url: d.URL}
	// A session of protocol 2025-03-26, which may send batches.
	old := &rawClient{url: d.URL}
	resp, body := old.do(t, "POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize 2025-03-26: %s %s", resp.Status, body)
	}
	old.session = resp.Header.Get("Mcp-Session-Id")
	oldHdr := map[string]string{"Mcp-Protocol-Version": "2025-03-26"}

	good := d.Connect(t, nil)
	var served sync.WaitGroup
	ctx, stop := context.WithCancel(context.Background())
	var goodCalls int
	var goodErr error
	served.Add(1)
	go func() {
		defer served.Done()
		for ctx.Err() == nil {
			res, err := testutil.CallTool(t, good, "s__echo", map[string]any{"text": "still here"})
			if err != nil || res.IsError || testutil.ToolText(res) != "still here" {
				goodErr = err
				if err == nil {
					goodErr = errorString("tool result " + testutil.ToolText(res))
				}
				return
			}
			goodCalls++
		}
	}()

	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []httpCase{
		// HTTP-level refusals.
		{"wrong content type", c, "POST", ping, hdr("Content-Type", "text/plain"), 415, `"code":-32600`},
		{"form content type", c, "POST", ping, hdr("Content-Type", "application/x-www-form-urlencoded"), 415, `"code":-32600`},
		{"missing Accept", c, "POST", ping, hdr("Accept", ""), 406, `"code":-32600`},
		{"Accept without JSON or SSE", c, "POST", ping, hdr("Accept", "text/html"), 406, `"code":-32600`},
		{"GET accepting no event stream", c, "GET", "", hdr("Accept", "application/json"), 406, `text/event-stream`},
		{"unknown HTTP method", c, "PATCH", ping, nil, 405, `use POST, GET or DELETE`},
		{"missing session", other, "POST", ping, nil, 400, `missing Mcp-Session-Id`},
		{"unknown session", other, "POST", ping, hdr("Mcp-Session-Id", "0123456789abcdef"), 404, `not found`},
		{"unknown session, GET", other, "GET", "", hdr("Mcp-Session-Id", "nope", "Accept", "text/event-stream"), 404, `not found`},
		{"unknown session, DELETE", other, "DELETE", "", hdr("Mcp-Session-Id", "nope"), 404, `not found`},
		{"bad protocol version header", c, "POST", ping, hdr("Mcp-Protocol-Version", "2024-13-45"), 400, `unsupported Mcp-Protocol-Version`},
		{"protocol version list in the header", c, "POST", ping, hdr("Mcp-Protocol-Version", "2025-11-25, 2025-06-18"), 400, `unsupported Mcp-Protocol-Version`},
		{"foreign Host", c, "POST", ping, hdr("Host", "attacker.example"), 403, `allowed_hosts`},
		{"foreign Origin", c, "POST", ping, hdr("Origin", "https://attacker.example"), 403, `allowed_origins`},
		{"20 MB body", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 20<<20) + `"}}`, nil, 413, `max_message_bytes`},

		// Not JSON: -32700.
		{"empty body", c, "POST", ``, nil, 400, `"id":null,"error":{"code":-32700`},
		{"truncated JSON", c, "POST", `{"jsonrpc":"2.0","id":1,"meth`, nil, 400, `"code":-32700`},
		{"trailing garbage", c, "POST", ping + `}`, nil, 400, `"code":-32700`},
		{"invalid UTF-8", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s__echo","arguments":{"text":"` + "\xff\xfe\xc3" + `"}}}`, nil, 400, `"code":-32700`},
		{"nesting beyond any parser's depth", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + deep(20000) + `}}`, nil, 400, `"code":-32700`},

		// JSON, but not a valid request: -32600.
		{"bare number", c, "POST", `42`, nil, 400, `"id":null,"error":{"code":-32600`},
		{"bare string", c, "POST", `"ping"`, nil, 400, `"code":-32600`},
		{"bare null", c, "POST", `null`, nil, 400, `"code":-32600`},
		{"not JSON-RPC", c, "POST", `{"hello":"world"}`, nil, 400, `"code":-32600`},
		{"jsonrpc 1.0", c, "POST", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, nil, 400, `"code":-32600`},
		{"jsonrpc missing", c, "POST", `{"id":1,"method":"ping"}`, nil, 400, `"code":-32600`},
		{"method of wrong type", c, "POST", `{"jsonrpc":"2.0","id":1,"method":["ping"]}`, nil, 400, `"code":-32600`},
		{"id null", c, "POST", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil, 400, `"id":null,"error":{"code":-32600`},
		{"id boolean", c, "POST", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, nil, 400, `"id":null,"error":{"code":-32600`},
		{"id object", c, "POST", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, nil, 400, `"code":-32600`},
		{"id array", c, "POST", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, nil, 400, `"code":-32600`},
		{"params a string", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, nil, 400, `"code":-32600`},
		{"params a number", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":7}`, nil, 400, `"code":-32600`},
		{"id without method or result", c, "POST", `{"jsonrpc":"2.0","id":1}`, nil, 400, `"code":-32600`},
		{"batch where not allowed", c, "POST", `[` + ping + `]`, nil, 400, `only clients that negotiated 2025-03-26`},
		{"empty batch", old, "POST", `[]`, oldHdr, 400, `"code":-32600`},
		{"batch of non-objects", old, "POST", `[1,"x"]`, oldHdr, 200, `[{"jsonrpc":"2.0","id":null,"error":{"code":-32600`},
		{"initialize inside a batch", old, "POST", `[{"jsonrpc":"2.0","id":5,"method":"initialize","params":{}}]`, oldHdr, 200, `"id":5,"error":{"code":-32600`},
		{"initialize again", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, hdr("Mcp-Session-Id", ""), 200, `"protocolVersion":"2025-11-25"`},

		// Valid requests MCP refuses: a JSON-RPC error with HTTP 200.
		{"unknown method", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/destroy"}`, nil, 200, `"id":1,"error":{"code":-32601`},
		{"notification with an id", c, "POST", `{"jsonrpc":"2.0","id":3,"method":"notifications/initialized"}`, nil, 200, `"id":3,"error":{"code":-32601`},
		{"params an array", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["s__echo"]}`, nil, 200, `"code":-32602`},
		{"tool name of wrong type", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, nil, 200, `"code":-32602`},
		{"unknown tool", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s__nothing"}}`, nil, 200, `"code":-32602`},
		{"1,000-deep arguments", c, "POST", `{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"s__echo","arguments":{"text":"deep","x":` + deep(1000) + `}}}`, nil, 200, `"id":"deep","result"`},
		{"1,000-deep params of ping", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + deep(1000) + `}}`, nil, 200, `"result":{}`},

		// Messages without an answer: 202 and no body.
		{"response sent to the server", c, "POST", `{"jsonrpc":"2.0","id":99,"result":{}}`, nil, 202, ``},
		{"error response sent to the server", c, "POST", `{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"no"}}`, nil, 202, ``},
		{"cancel of an unknown request", c, "POST", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never"}}`, nil, 202, ``},
		{"unknown notification", c, "POST", `{"jsonrpc":"2.0","method":"notifications/whatever"}`, nil, 202, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t)
			if got := testutil.ToolText(testutil.MustCallTool(t, good, "s__echo", map[string]any{"text": "after"})); got != "after" {
				t.Errorf("the other session after this case: echo = %q", got)
			}
		})
	}
	stop()
	served.Wait()
	if goodErr != nil {
		t.Errorf("the other session failed during the malformed requests: %v", goodErr)
	}
	if goodCalls == 0 {
		t.Error("the other session's loop made no call during the malformed requests")
	}
	t.Logf("%d cases; the other session's loop made %d calls meanwhile", len(tests), goodCalls)
}

type errorString string

func (e errorString) Error() string { return string(e) }
