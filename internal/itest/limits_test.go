package itest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// openEventStream opens c's standalone event stream (GET) and returns the
// response, whose body the test reads; it is closed when the test ends.
func (c *rawClient) openEventStream(t *testing.T, ctx context.Context) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("GET event stream: %s", resp.Status)
	}
	return resp
}

// TestMaxSessions: an initialize beyond max_sessions gets 503 with
// Retry-After and a JSON-RPC error naming the limit; once a session ends,
// a new one is served.
func TestMaxSessions(t *testing.T) {
	d := gatewayWith(t, "max_sessions = 2", "[backends.s]\ncommand = \"FAKE\"\n")
	first := newRawClient(t, d.URL)
	newRawClient(t, d.URL)
	extra := &rawClient{url: d.URL}
	resp, body := extra.do(t, "POST", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, `"id":7,"error":{"code":-32005`) || !strings.Contains(body, "max_sessions") {
		t.Fatalf("third initialize → %s Retry-After %q %s; want 503 with Retry-After and error -32005 naming max_sessions",
			resp.Status, resp.Header.Get("Retry-After"), body)
	}
	if resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("a refused initialize got a session id")
	}
	if resp, body := first.do(t, "DELETE", "", nil); resp.StatusCode != 200 {
		t.Fatalf("DELETE → %s %s", resp.Status, body)
	}
	newRawClient(t, d.URL) // fails the test unless served
}

// TestIdleSessionWithOpenStreamExpires: a session whose client keeps its
// GET stream open but sends nothing ends after session_idle_timeout; the
// stream ends with it and the session is gone.
func TestIdleSessionWithOpenStreamExpires(t *testing.T) {
	d := gatewayWith(t, `session_idle_timeout = "1s"`, "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := c.openEventStream(t, ctx)
	// The stream ends when the session does; until then it carries at
	// most a priming event and keep-alives.
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
	}
	if ctx.Err() != nil {
		t.Fatal("the event stream of an idle session was still open after 30s; session_idle_timeout is 1s")
	}
	if resp, body := c.do(t, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ping in the expired session → %s %s; want 404", resp.Status, body)
	}
}

// TestMaxConcurrentRequests: with one request in process, a second POST
// beyond max_concurrent_requests = 1 gets 503 with Retry-After and -32005;
// once the first is answered, requests are served again.
func TestMaxConcurrentRequests(t *testing.T) {
	d := gatewayWith(t, "max_concurrent_requests = 1", "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A call that sends one progress notification, then waits: its event
	// stream has begun once the first event arrives, so it is in process.
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"s__progress","arguments":{"steps":2,"ms":2000},"_meta":{"progressToken":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	long, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Body.Close()
	sc := bufio.NewScanner(long.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), "notifications/progress") {
	}
	resp, body := c.do(t, "POST", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, `"code":-32005`) || !strings.Contains(body, "max_concurrent_requests") {
		t.Errorf("second request → %s Retry-After %q %s; want 503 with Retry-After and -32005 naming max_concurrent_requests",
			resp.Status, resp.Header.Get("Retry-After"), body)
	}
	answered := false
	for sc.Scan() {
		answered = answered || strings.Contains(sc.Text(), `"id":"long","result"`)
	}
	if !answered {
		t.Fatalf("the long call was not answered: %v", sc.Err())
	}
	if got := c.post(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); !strings.Contains(got, `"result":{}`) {
		t.Errorf("ping after the long call → %s", got)
	}
}

// TestEventStreamOutlivesReadTimeout: http_read_timeout bounds reading a
// request, not the event stream that answers it: a GET stream keeps
// getting keep-alives long after the read timeout passed.
func TestEventStreamOutlivesReadTimeout(t *testing.T) {
	d := gatewayWith(t, "http_read_timeout = \"500ms\"\nsse_keepalive_interval = \"100ms\"", "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := c.openEventStream(t, ctx)
	sc := bufio.NewScanner(stream.Body)
	start := time.Now()
	keepAlives := 0
	for keepAlives < 15 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), ": keep-alive") {
			keepAlives++
		}
	}
	if keepAlives < 15 {
		t.Fatalf("the event stream ended after %d keep-alives (%v; http_read_timeout is 500ms): %v", keepAlives, time.Since(start), sc.Err())
	}
}

// TestHTTPTimeouts: a client that sends half a request is cut off after
// http_read_timeout, and a kept-alive connection that sends nothing more is
// closed after http_idle_timeout; before both keys, neither ever was.
func TestHTTPTimeouts(t *testing.T) {
	d := gatewayWith(t, "http_read_timeout = \"300ms\"\nhttp_idle_timeout = \"300ms\"", "[backends.s]\ncommand = \"FAKE\"\n")
	addr := strings.TrimSuffix(strings.TrimPrefix(d.URL, "http://"), "/mcp")
	tests := []struct {
		name, send, want string
	}{
		{"a body that never comes", "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"", "HTTP/1.1 400"},
		{"headers that never end", "POST /mcp HTTP/1.1\r\nHost: localhost\r\n", ""},
		{"an idle kept-alive connection", "OPTIONS /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n", "HTTP/1.1 204"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tt.send); err != nil {
				t.Fatal(err)
			}
			// The daemon closes the connection: reading ends (a deadline
			// only keeps a failing test from hanging).
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			got, err := io.ReadAll(conn)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection was still open after 30s; got %q", got)
			}
			if !strings.HasPrefix(string(got), tt.want) {
				t.Errorf("got %q, want it to start with %q", got, tt.want)
			}
		})
	}
}
