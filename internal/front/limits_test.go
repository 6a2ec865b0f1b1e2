package front_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// A client refused for load again and again is journaled five times a
// minute, the fifth saying that the rest are counted: flooding the
// gateway does not also flood the journal (issue 21).
func TestRefusalsForLoadAreRateLimited(t *testing.T) {
	logs := &testutil.LogRecorder{}
	g := gateway.New(noBackends{}, gateway.Options{Version: "test", MaxSessions: 4, Logger: slog.New(slog.DiscardHandler)})
	defer g.Close()
	h := front.New(g, front.Options{Endpoint: "/mcp", MaxMessageBytes: maxBody, MaxBatchSize: 1, Logger: slog.New(logs)})
	session := initialize(t, h, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	for range 12 {
		req := httptest.NewRequest("POST", "http://localhost/mcp", strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "max_batch_size") {
			t.Fatalf("a batch of 2 with max_batch_size = 1: %d %s", w.Code, w.Body)
		}
	}
	var logged []string
	for _, m := range logs.Messages() {
		if strings.Contains(m, "max_batch_size exceeded") {
			logged = append(logged, m)
		}
	}
	if len(logged) != 5 {
		t.Fatalf("%d refusals journaled of 12, want 5:\n%s", len(logged), strings.Join(logged, "\n"))
	}
	if !strings.Contains(logged[4], "counted, not logged") || !strings.Contains(logged[4], "client=") {
		t.Errorf("the fifth refusal names no client or does not say the rest are counted: %s", logged[4])
	}
}
