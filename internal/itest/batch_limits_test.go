package itest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// batchSession initializes a session of protocol 2025-03-26, the only one
// that may send batches, through hc, and returns its id.
func batchSession(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, body := exchange(t, hc, url, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"batch","version":"1"}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	exchange(t, hc, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", id)
	return id
}

// batchOf returns a batch of n messages made by one(i).
func batchOf(n int, one func(i int) string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = one(i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

func ping(i int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+1) }

// errorCode returns the JSON-RPC error code of a refused POST's answer.
func errorCode(t *testing.T, body string) int {
	t.Helper()
	var a struct {
		Error struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return a.Error.Code
}

// A batch has a maximum size, and each of its messages counts against
// max_concurrent_requests as a POST of its own: a batch of cli calls
// larger than the free slots runs none of its programs.
func TestBatchesMeetThePerRequestLimits(t *testing.T) {
	dir := t.TempDir()
	d := gatewayWith(t, "max_batch_size = 8\nmax_concurrent_requests = 4", `
[backends.sh]
transport = "cli"

[backends.sh.tools.mark]
command = ["touch", "`+dir+`/{{n}}"]
input_schema = { type = "object", properties = { n = { type = "string" } }, required = ["n"] }
`)
	hc := http.DefaultClient
	sess := batchSession(t, hc, d.URL)
	post := func(body string) (*http.Response, string) {
		return exchange(t, hc, d.URL, body, "Mcp-Session-Id", sess)
	}

	resp, body := post(batchOf(9, ping))
	if resp.StatusCode != http.StatusBadRequest || errorCode(t, body) != -32600 || !strings.Contains(body, "max_batch_size") {
		t.Errorf("batch of 9 with max_batch_size = 8: %s %s; want 400, -32600 naming max_batch_size", resp.Status, body)
	}

	calls := batchOf(5, func(i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sh__mark","arguments":{"n":"%d"}}}`, i+1, i)
	})
	resp, body = post(calls)
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, body) != -32005 || !strings.Contains(body, "max_concurrent_requests") {
		t.Errorf("batch of 5 calls with max_concurrent_requests = 4: %s %s; want 503, -32005 naming max_concurrent_requests", resp.Status, body)
	}
	if ran, _ := filepath.Glob(filepath.Join(dir, "*")); len(ran) != 0 {
		t.Errorf("the refused batch ran %d programs", len(ran))
	}

	// Within both limits a batch is served, and the slots come back.
	for range 2 {
		resp, body = post(batchOf(4, ping))
		var answers []json.RawMessage
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &answers) != nil || len(answers) != 4 {
			t.Fatalf("batch of 4 pings: %s %s; want 4 answers", resp.Status, body)
		}
	}
}

// Each message of a batch takes a token of the client's rate_limit: a
// batch that needs more tokens than are left is refused as a whole.
func TestBatchMessagesCountAgainstTheClientRateLimit(t *testing.T) {
	d, _ := accessGateway(t) // client capped: rate_limit = "3/1h"
	hc := tokenClient(cappedToken)
	sess := batchSession(t, hc, d.URL) // initialize and initialized: 2 of 3
	resp, body := exchange(t, hc, d.URL, batchOf(2, ping), "Mcp-Session-Id", sess)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "rate_limit") {
		t.Errorf("batch of 2 with 1 token left: %s %s; want 429 naming rate_limit", resp.Status, body)
	}
}
