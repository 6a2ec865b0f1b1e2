package itest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// leakySecret stands for what a server may write in its error output: a
// token, a password, a stack trace with a connection string.
const leakySecret = "SECRET-leak-b7e1f0c2"

// leakyRemote is a Streamable HTTP server that starts well and answers
// every tools/call with HTTP 500 and leakySecret in the body: a failure
// no real server shows on demand.
func leakyRemote(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Parse(body)
	if err != nil || !msg.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := func(v string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "leaky-1")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, v)
	}
	switch msg.Method {
	case "initialize":
		result(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"leaky","version":"1"}}`)
	case "tools/list":
		result(`{"tools":[{"name":"boom","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		http.Error(w, "internal error: db=postgres://admin:"+leakySecret+"@db/prod", http.StatusInternalServerError)
	default:
		result(`{}`)
	}
}

// TestBackendErrorTextStaysInTheJournal: what a server writes about its
// own failure (a remote's error body, a child's stderr) never reaches a
// client, neither in call errors nor in the status resources; clients get
// the state and a short cause, and the journal keeps the detail.
func TestBackendErrorTextStaysInTheJournal(t *testing.T) {
	leaky := httptest.NewServer(http.HandlerFunc(leakyRemote))
	t.Cleanup(leaky.Close)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "maintenance; token "+leakySecret, http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	d := gatewayWith(t, "status_resources = true", fmt.Sprintf(`
[backends.leaky]
url = %q

[backends.down]
url = %q
max_restarts = 0

[backends.dies]
command = "FAKE"
args = ["--stderr-at-start", "panic: password=%s", "--exit-at-start", "3"]
max_restarts = 0
`, leaky.URL+"/mcp", down.URL+"/mcp", leakySecret))
	c := newRawClient(t, d.URL)
	answers := map[string]string{}
	ask := func(what, body string) string {
		answers[what] = c.post(t, body)
		return answers[what]
	}
	// The journal has the detail of both failures at start before the
	// status is read: what clients see is not merely not yet there.
	d.Stderr.Await(t, 30*time.Second, "the journal entries with the servers' own words", func(out string) bool {
		return strings.Contains(out, "maintenance; token "+leakySecret) && strings.Contains(out, "panic: password="+leakySecret)
	})
	testutil.Eventually(t, 30*time.Second, "down and dies failed", func() bool {
		h := ask("mcpgate://health", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"mcpgate://health"}}`)
		return strings.Count(h, `\"state\":\"failed\"`) == 2
	})
	health := answers["mcpgate://health"]
	for _, want := range []string{`\"lastError\":\"HTTP 503; gave up after 0 restarts\"`, `\"lastError\":\"exited with status 3; gave up after 0 restarts\"`} {
		if !strings.Contains(health, want) {
			t.Errorf("mcpgate://health lacks %s: %s", want, health)
		}
	}
	ask("mcpgate://backend/down", `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"mcpgate://backend/down"}}`)
	call := ask("tools/call leaky__boom", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"leaky__boom","arguments":{}}}`)
	if !strings.Contains(call, `backend \"leaky\": HTTP 500`) {
		t.Errorf("tools/call leaky__boom = %s, want the error naming the backend and HTTP 500", call)
	}
	for what, answer := range answers {
		if strings.Contains(answer, leakySecret) {
			t.Errorf("%s shows the server's own words to a client: %s", what, answer)
		}
	}
	d.Stderr.Await(t, 30*time.Second, "the journal entry of the failed call", func(out string) bool {
		return strings.Contains(out, "a request to the server failed") && strings.Contains(out, "admin:"+leakySecret)
	})
}
