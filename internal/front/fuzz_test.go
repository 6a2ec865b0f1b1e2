package front_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// noBackends is a registry without backends: the front and the gateway's
// own methods are what is fuzzed.
type noBackends struct{}

func (noBackends) Backends() []*backend.Backend    { return nil }
func (noBackends) Backend(string) *backend.Backend { return nil }

// maxBody is the fuzzed handler's max_message_bytes: small, so that huge
// bodies are within reach of the fuzzer.
const maxBody = 64 << 10

// truncatedBody is a request body that breaks off: the client's
// connection died mid-body.
type truncatedBody struct{ r io.Reader }

func (b truncatedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (truncatedBody) Close() error { return nil }

// FuzzHandler sends the HTTP front any method, headers and body (repeated
// up to beyond max_message_bytes, or broken off), in a session that exists
// ("$SESSION" in a header value names it). The handler never panics and
// always answers with a status it documents; every JSON answer is a
// JSON-RPC message, every error status carries a JSON-RPC error, and every
// event of an event stream is JSON.
func FuzzHandler(f *testing.F) {
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}}`
	std := "Content-Type: application/json\nAccept: application/json, text/event-stream\nMcp-Session-Id: $SESSION\n"
	modern := "Content-Type: application/json\nAccept: application/json, text/event-stream\nMcp-Protocol-Version: 2026-07-28\n"
	for _, s := range []struct {
		method, header, body string
		repeat               uint16
		truncate             bool
	}{
		{"POST", std, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, false},
		{"POST", "Content-Type: application/json\nAccept: application/json, text/event-stream\n", init, 0, false},
		{"POST", std, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"},1]`, 0, false},
		{"POST", std, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, 0, false},
		{"POST", std + "Mcp-Protocol-Version: 2025-03-26\n", `{"jsonrpc":"2.0","id":"c","method":"tools/list","params":{"cursor":"x"}}`, 0, false},
		{"POST", std, `{"jsonrpc":"2.0","id":1,"result":{}}`, 0, false},
		{"POST", std, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, 0, false},
		{"POST", std, `[`, 40000, false},
		{"POST", std, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, true},
		{"POST", std, "\xff\xfe", 0, false},
		{"GET", "Accept: text/event-stream\nMcp-Session-Id: $SESSION\nLast-Event-Id: 0-0\n", ``, 0, false},
		{"DELETE", "Mcp-Session-Id: $SESSION\n", ``, 0, false},
		{"OPTIONS", "Origin: http://localhost\n", ``, 0, false},
		{"BREW", "Host: evil.example\n", `coffee`, 3, false},
		// Stateless (2026-07-28) requests: no session.
		{"POST", modern + "Mcp-Method: server/discover\n", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, 0, false},
		{"POST", modern + "Mcp-Method: tools/call\nMcp-Name: =?base64?eA==?=\n", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"},"name":"x"}}`, 0, false},
		{"POST", modern + "Mcp-Method: subscriptions/listen\n", `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a://b"]}}}`, 0, false},
		{"POST", modern + "Mcp-Method: ping\n", `[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}]`, 0, false},
	} {
		f.Add(s.method, s.header, []byte(s.body), s.repeat, s.truncate)
	}
	f.Fuzz(func(t *testing.T, method, header string, body []byte, repeat uint16, truncate bool) {
		g := gateway.New(noBackends{}, gateway.Options{Version: "fuzz", MaxSessions: 4, Logger: slog.New(slog.DiscardHandler)})
		defer g.Close()
		h := front.New(g, front.Options{Endpoint: "/mcp", MaxMessageBytes: maxBody, MaxConcurrentRequests: 4,
			ResumeWindow: time.Millisecond, KeepAlive: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		session := initialize(t, h, init)

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		var r io.Reader = bytes.NewReader(bytes.Repeat(body, int(repeat)+1))
		req := &http.Request{Method: method, URL: &url.URL{Path: "/mcp"}, Host: "localhost", Header: http.Header{},
			Body: io.NopCloser(r), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		if truncate {
			req.Body = truncatedBody{r}
		}
		for _, line := range strings.Split(header, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.ReplaceAll(strings.TrimSpace(v), "$SESSION", session)
			if strings.EqualFold(k, "Host") {
				req.Host = v
				continue
			}
			req.Header.Add(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req.WithContext(ctx))
		checkAnswer(t, w)
	})
}

// initialize starts a session through h and returns its id.
func initialize(t *testing.T, h http.Handler, body string) string {
	req := httptest.NewRequest("POST", "http://localhost/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	id := w.Result().Header.Get("Mcp-Session-Id")
	if w.Code != 200 || id == "" {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	return id
}

// documented are the statuses the front answers with (mcpgated(8)).
var documented = map[int]bool{200: true, 202: true, 204: true, 400: true, 403: true, 404: true, 405: true, 406: true, 413: true, 415: true, 503: true}

func checkAnswer(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	res := w.Result()
	body := w.Body.Bytes()
	if !documented[res.StatusCode] {
		t.Fatalf("status %d is not one the front documents; body %q", res.StatusCode, body)
	}
	ct := res.Header.Get("Content-Type")
	switch {
	case ct == "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" && !json.Valid([]byte(data)) {
				t.Fatalf("event data %q is not JSON", data)
			}
		}
	case len(body) > 0:
		if !json.Valid(body) {
			t.Fatalf("status %d with a body that is not JSON: %q", res.StatusCode, body)
		}
		if res.StatusCode >= 400 && !bytes.Contains(body, []byte(`"error":{"code":`)) {
			t.Fatalf("status %d without a JSON-RPC error: %q", res.StatusCode, body)
		}
		if body[0] != '{' && body[0] != '[' {
			t.Fatalf("answer %q is no JSON-RPC message", body)
		}
	case res.StatusCode >= 400:
		t.Fatalf("status %d with an empty body", res.StatusCode)
	}
}
