package http1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// fakeConn is a client connection that sends what its reader yields and
// drops what the server writes back.
type fakeConn struct{ io.Reader }

func (c fakeConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c fakeConn) Close() error                     { return nil }
func (c fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c fakeConn) SetDeadline(time.Time) error      { return nil }
func (c fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c fakeConn) SetWriteDeadline(time.Time) error { return nil }

// repeat yields req over and over: a client that sends one request after
// another and never reads, so that what is measured is the server's work.
type repeat struct {
	req []byte
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := copy(p, r.req[r.off:])
	r.off = (r.off + n) % len(r.req)
	return n, nil
}

// TestRequestAllocationBudget bounds what the server allocates for a
// kept-alive POST answered with a small JSON body. Measured: 7, the
// plain parse's 4 (the request with its URL and values, its text, the
// header map and its table; net/http's parser made 16), the request's
// context (2) and the handler's one header value; the connection loop
// itself allocates nothing per request.
// A regression fails here before it shows in make bench.
func TestRequestAllocationBudget(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	req := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:7431\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: 0123456789abcdef\r\n" +
		"Mcp-Protocol-Version: 2025-11-25\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`)
	var buf [512]byte
	s := &Server{ReadTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.ReadFull(r.Body, buf[:r.ContentLength])
		_ = buf[:n]
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Write(answer)
	})}
	c := s.newConn(fakeConn{&repeat{req: []byte(req)}})
	if !c.serveOne() {
		t.Fatal("the connection was not kept")
	}
	const budget = 7
	got := testing.AllocsPerRun(200, func() {
		if !c.serveOne() {
			t.Fatal("the connection was not kept")
		}
	})
	t.Logf("%.0f allocations per request", got)
	if got > budget {
		t.Errorf("%.0f allocations per request; the budget is %d", got, budget)
	}
}

// BenchmarkReadRequest compares the parse of a typical MCP POST's head,
// as Go's client sends it, by readPlain and by net/http's parser.
func BenchmarkReadRequest(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	req := []byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:7431\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\nAccept: application/json, text/event-stream\r\n" +
		"Content-Type: application/json\r\nMcp-Protocol-Version: 2025-11-25\r\n" +
		"Mcp-Session-Id: 0123456789abcdef0123456789abcdef\r\nAccept-Encoding: gzip\r\n\r\n" + body)
	for _, plain := range []bool{true, false} {
		name := map[bool]string{true: "plain", false: "net-http"}[plain]
		b.Run(name, func(b *testing.B) {
			r := bytes.NewReader(req)
			br := bufio.NewReader(r)
			var pb plainBody
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(req)
				br.Reset(r)
				br.Peek(1)
				var q *http.Request
				if plain {
					q = readPlain(br, &pb)
				} else {
					q, _ = http.ReadRequest(br)
				}
				if q == nil || q.ContentLength != int64(len(body)) {
					b.Fatal("not read")
				}
			}
		})
	}
}
