package itest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// healthURL is the /healthz address beside a daemon's MCP endpoint.
func healthURL(mcpURL string) string {
	return strings.TrimSuffix(mcpURL, "/mcp") + "/healthz"
}

// getHealth asks /healthz with no credentials and returns the status and body.
func getHealth(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 30*time.Second), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /healthz answers anyone, even where every other request needs a token,
// and opens nothing else: the MCP endpoint and every other path still ask
// for a token, and only GET and HEAD are served on it.
func TestHealthzNeedsNoTokenAndOpensNothingElse(t *testing.T) {
	d, _ := accessGateway(t)
	hz := healthURL(d.URL)
	if code, body := getHealth(t, http.MethodGet, hz); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz without a token: %d %q, want 200 \"ok\\n\"", code, body)
	}
	if code, body := getHealth(t, http.MethodHead, hz); code != 200 || body != "" {
		t.Errorf("HEAD /healthz: %d %q, want 200 and no body", code, body)
	}
	if code, _ := getHealth(t, http.MethodPost, hz); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d, want 405", code)
	}
	if code, body := getHealth(t, http.MethodGet, d.URL); code != http.StatusUnauthorized {
		t.Errorf("GET /mcp without a token: %d %q, want 401", code, body)
	}
	for _, path := range []string{"/healthz/", "/healthzx", "/metrics"} {
		url := strings.TrimSuffix(d.URL, "/mcp") + path
		if code, body := getHealth(t, http.MethodGet, url); code != http.StatusNotFound {
			t.Errorf("GET %s without a token: %d %q, want 404", path, code, body)
		}
	}
	if resp, body := exchange(t, http.DefaultClient, d.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("initialize without a token: %s %s, want 401", resp.Status, body)
	}
}

// With no backend able to take a call, /healthz says so without naming it.
func TestHealthzWithoutHealthyBackend(t *testing.T) {
	d := gateway(t, `
[backends.secretname]
command = "/nonexistent/mcp-server"
`)
	testutil.Eventually(t, 30*time.Second, "/healthz answers 503", func() bool {
		code, _ := getHealth(t, http.MethodGet, healthURL(d.URL))
		return code == http.StatusServiceUnavailable
	})
	if code, body := getHealth(t, http.MethodGet, healthURL(d.URL)); code != 503 || body != "no healthy backend\n" {
		t.Errorf("/healthz with the only backend failed: %d %q, want 503 \"no healthy backend\\n\"", code, body)
	}
}

// On SIGTERM the host fails its health check before it exits, refuses new
// sessions with 503 so that a balancer retries them elsewhere, answers its
// open sessions' new requests with 404 so that their clients initialize
// again, and still answers the calls in flight.
func TestStoppingHostFailsHealthThenDrains(t *testing.T) {
	port := testutil.FreePort(t)
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	d := gatewayWith(t, fmt.Sprintf("drain_timeout = \"60s\"\nmetrics_listen = \"127.0.0.1:%d\"", port), "[backends.work]\ncommand = \"FAKE\"\n")
	if code, body := getHealth(t, http.MethodGet, healthURL(d.URL)); code != 200 {
		t.Fatalf("/healthz of a ready host: %d %q", code, body)
	}
	busy, idle := newRawClient(t, d.URL), newRawClient(t, d.URL)
	var wg sync.WaitGroup
	var inflight string
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Long enough to outlast the checks below; they await events, not it.
		inflight = busy.post(t, callBody(1, "work__slow", `{"ms":4000}`))
	}()
	testutil.Eventually(t, 30*time.Second, "the slow call in flight", func() bool {
		return value(t, scrape(t, metrics), "mcpgate_calls_in_flight", map[string]string{"backend": "work"}) > 0
	})
	from := len(d.Notify.Messages())
	d.Signal(syscall.SIGTERM)
	d.AwaitNotify(t, from, 30*time.Second, "STOPPING=1", testutil.Has("STOPPING=1"))
	if code, body := getHealth(t, http.MethodGet, healthURL(d.URL)); code != 503 || body != "draining\n" {
		t.Errorf("/healthz while draining: %d %q, want 503 \"draining\\n\"", code, body)
	}
	if resp, body := idle.do(t, "POST", callBody(3, "work__echo", `{"text":"late"}`), nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "shutting down") {
		t.Errorf("a request of an open session while draining: %s %s, want 404 saying the gateway is shutting down", resp.Status, body)
	}
	fresh := &rawClient{url: d.URL}
	if resp, body := fresh.do(t, "POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`, nil); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("initialize while draining: %s %s, want 503 and no session", resp.Status, body)
	}
	wg.Wait()
	if !strings.Contains(inflight, "slept 4000 ms") {
		t.Errorf("the call in flight at SIGTERM: %s, want its answer", inflight)
	}
	if code := d.AwaitExit(t, 30*time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// Every metric carries the host label, so series of several hosts behind
// one balancer stay apart.
func TestMetricsCarryTheHostLabel(t *testing.T) {
	port := testutil.FreePort(t)
	d := gatewayWith(t, fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port), "[backends.m]\ncommand = \"FAKE\"\n")
	newRawClient(t, d.URL).post(t, callBody(1, "m__echo", `{"text":"ok"}`))
	host, _ := os.Hostname()
	fams := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if got := value(t, fams, "mcpgate_calls_total", map[string]string{"backend": "m", "outcome": "ok", "host": host}); got != 1 {
		t.Errorf("mcpgate_calls_total{host=%q} = %v, want 1", host, got)
	}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == "host" && l.GetValue() == host
			}
			if !found {
				t.Errorf("%s has a series without host=%q", name, host)
				break
			}
		}
	}
}
