package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// start serves h on a loopback port until the test ends.
func start(t *testing.T, h http.Handler, set ...func(*Server)) (*Server, string) {
	t.Helper()
	s := &Server{Handler: h, ReadTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	for _, f := range set {
		f(s)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s, l.Addr().String()
}

// raw sends req on a new connection and returns the connection and a
// reader of what comes back.
func raw(t *testing.T, addr, req string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, string(body)
}

var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.Copy(w, r.Body)
})

// Requests of one client share its connection, and a response complete
// when the handler returns carries its length.
func TestKeepAliveWithContentLength(t *testing.T) {
	_, addr := start(t, echo)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	reused := 0
	for i, body := range []string{`{"a":1}`, strings.Repeat("x", 3000), ""} {
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused {
					reused++
				}
			},
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != body || resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 {
			t.Errorf("request %d: body %d bytes, Content-Length %d, Transfer-Encoding %v; want %d bytes with their length",
				i, len(got), resp.ContentLength, resp.TransferEncoding, len(body))
		}
		if resp.Header.Get("Date") == "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: header %v", i, resp.Header)
		}
	}
	if reused != 2 {
		t.Errorf("%d of 2 later requests reused the connection", reused)
	}
}

// A flushed response reaches the client while the handler still runs, in
// chunks; so does one too large to wait for the handler's end, whole.
func TestFlushedAndLargeResponsesAreChunked(t *testing.T) {
	release := make(chan struct{})
	large := bytes.Repeat([]byte("0123456789"), 100_000)
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/large" {
			w.Write(large)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	resp, err := http.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first event: %q, %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: second\n\n" || len(resp.TransferEncoding) != 1 {
		t.Errorf("rest %q, Transfer-Encoding %v", rest, resp.TransferEncoding)
	}

	resp, err = http.Get("http://" + addr + "/large")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, large) || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("large body: %d bytes, Content-Type %q", len(got), resp.Header.Get("Content-Type"))
	}
}

// Requests net/http's server refuses before any handler runs are refused
// here too, each with the status that says why.
func TestRefusesWhatNetHTTPRefuses(t *testing.T) {
	_, addr := start(t, echo, func(s *Server) { s.MaxHeaderBytes = 1 << 10 })
	tests := []struct {
		name, req string
		status    int
	}{
		{"garbage", "HELLO\r\n\r\n", 400},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"bad header name", "GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", 400},
		{"header too large", "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("x", 8<<10) + "\r\n\r\n", 431},
		{"HTTP/2", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"unknown expectation", "POST / HTTP/1.1\r\nHost: a\r\nExpect: coffee\r\nContent-Length: 1\r\n\r\nx", 417},
		{"unknown transfer encoding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: zip\r\n\r\n", 501},
		{"two lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400},
		{"long garbage", "<script>" + strings.Repeat("x", 900) + "\r\n\r\n", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, br := raw(t, addr, tt.req)
			resp, body := readResponse(t, br, http.MethodGet)
			if resp.StatusCode != tt.status || !resp.Close {
				t.Errorf("status %d, close %v (%q); want %d and close", resp.StatusCode, resp.Close, body, tt.status)
			}
			// The parser's error may quote the request: never much of it,
			// never as something a browser would render.
			if len(body) > 210 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("a refusal of %d bytes with header %v", len(body), resp.Header)
			}
		})
	}
}

// Pipelined requests are answered in order; Connection: close, and
// HTTP/1.0 unless it asks to keep alive, end the connection after their
// answer.
func TestPipeliningAndClose(t *testing.T) {
	_, addr := start(t, echo)
	c, br := raw(t, addr, "POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\none"+
		"POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\ntwo"+
		"POST /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 5\r\n\r\nthree")
	for _, want := range []string{"one", "two", "three"} {
		resp, body := readResponse(t, br, http.MethodPost)
		if body != want || resp.Close != (want == "three") {
			t.Errorf("got %q (close %v), want %q", body, resp.Close, want)
		}
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after Connection: close: %d bytes, %v; want EOF", n, err)
	}
	c.Close()

	_, br = raw(t, addr, "POST / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"+
		"POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\nbye")
	for _, want := range []string{"ok", "bye"} {
		if resp, body := readResponse(t, br, http.MethodPost); body != want || resp.Close != (want == "bye") {
			t.Errorf("HTTP/1.0: %q, close %v; want %q", body, resp.Close, want)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after HTTP/1.0 without keep-alive: %v, want EOF", err)
	}
}

// Expect: 100-continue is answered when the handler reads the body, and
// not at all when the handler answers without it: the connection then
// closes, the body never having come.
func TestExpectContinue(t *testing.T) {
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		io.Copy(w, r.Body)
	}))
	c, br := raw(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	if _, body := readResponse(t, br, http.MethodPost); body != "hello" {
		t.Errorf("body %q", body)
	}

	_, br = raw(t, addr, "POST /refuse HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if resp, _ := readResponse(t, br, http.MethodPost); resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d", resp.StatusCode)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after a refused expectation: %v, want EOF", err)
	}
}

// A body the handler left unread is read past, up to maxDrain: the
// connection serves the next request. A larger one closes it.
func TestUnreadBody(t *testing.T) {
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	}))
	small := strings.Repeat("x", 1000)
	_, br := raw(t, addr, "POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n"+small+
		"GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"/1", "/2"} {
		if _, body := readResponse(t, br, http.MethodGet); body != want {
			t.Errorf("got %q, want %q", body, want)
		}
	}

	c, br := raw(t, addr, "POST /big HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n")
	go c.Write(make([]byte, 1_000_000)) // may fail once the server closes
	if resp, body := readResponse(t, br, http.MethodPost); body != "/big" || resp.StatusCode != 200 {
		t.Errorf("big: %d %q", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection served on after an unread 1 MB body")
	}
}

// 204 and HEAD answers have no body; 202 without one says so.
func TestBodylessAnswers(t *testing.T) {
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
			if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrBodyNotAllowed) {
				t.Errorf("write after 204: %v", err)
			}
		case "/202":
			w.WriteHeader(http.StatusAccepted)
		default:
			io.WriteString(w, "hello")
		}
	}))
	_, br := raw(t, addr, "GET /204 HTTP/1.1\r\nHost: a\r\n\r\nGET /202 HTTP/1.1\r\nHost: a\r\n\r\nHEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []struct {
		method string
		status int
		length int64
		body   string
	}{{"GET", 204, 0, ""}, {"GET", 202, 0, ""}, {"HEAD", 200, 5, ""}, {"GET", 200, 5, "hello"}} {
		resp, body := readResponse(t, br, want.method)
		if resp.StatusCode != want.status || resp.ContentLength != want.length || body != want.body {
			t.Errorf("%s %d: got %d, length %d, %q", want.method, want.status, resp.StatusCode, resp.ContentLength, body)
		}
	}
}

// A header value with a line break cannot add a header line.
func TestHeaderValuesCannotSplitTheHeader(t *testing.T) {
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.URL.Query().Get("v"))
	}))
	_, br := raw(t, addr, "GET /?v=a%0d%0aSet-Cookie:%20x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, _ := readResponse(t, br, http.MethodGet)
	if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Echo") != "a  Set-Cookie: x=1" {
		t.Errorf("header %v", resp.Header)
	}
}

// A client that goes away while its handler waits cancels the request's
// context, and the connection ends.
func TestClientGoneCancelsRequest(t *testing.T) {
	cancelled := make(chan error, 1)
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		cancelled <- r.Context().Err()
	}), func(s *Server) { s.WatchAfter = time.Millisecond })
	c, _ := raw(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
	c.Close()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("context ended with %v", err)
	}
}

// The byte the watch reads of a pipelined request is the first of that
// request, not lost.
func TestWatchKeepsTheNextRequestsByte(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			close(started)
			<-release
		}
		io.WriteString(w, r.URL.Path)
	}), func(s *Server) { s.WatchAfter = time.Millisecond })
	c, br := raw(t, addr, "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started // the first request is read: the next one reaches the watch
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	conn := onlyConn(s)
	for !conn.tookByte() {
		time.Sleep(time.Millisecond) // internal state: there is no event to await
	}
	close(release)
	for _, want := range []string{"/wait", "/next"} {
		if _, body := readResponse(t, br, http.MethodGet); body != want {
			t.Errorf("got %q, want %q", body, want)
		}
	}
}

func (c *conn) tookByte() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cr.hasByte
}

func onlyConn(s *Server) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		return c
	}
	return nil
}

// Shutdown closes idle connections at once and lets a request in flight
// finish; Close cancels one.
func TestShutdownAndClose(t *testing.T) {
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			started <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, r.URL.Path)
	}))
	idle, idleBr := raw(t, addr, "GET /idle HTTP/1.1\r\nHost: a\r\n\r\n")
	readResponse(t, idleBr, http.MethodGet)
	_, busyBr := raw(t, addr, "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if _, err := idleBr.ReadByte(); err == nil {
		t.Error("the idle connection stayed open")
	}
	idle.Close()
	close(release)
	if resp, body := readResponse(t, busyBr, http.MethodGet); body != "/wait" || !resp.Close {
		t.Errorf("request in flight: %q, close %v", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("still accepting after Shutdown")
	}
}

func TestCloseCancelsRequests(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		ended <- r.Context().Err()
	}))
	raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started
	s.Close()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("context ended with %v", err)
	}
}

// A handler's panic closes its connection and is logged; the server
// serves on.
func TestPanicClosesTheConnection(t *testing.T) {
	var logged testutil.Buffer
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			io.WriteString(w, "partial")
			panic("boom")
		}
		io.WriteString(w, "fine")
	}), func(s *Server) { s.ErrorLog = log.New(&logged, "", 0) })
	_, br := raw(t, addr, "GET /panic HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, err := http.ReadResponse(br, nil); err == nil {
		t.Error("a response after the handler panicked")
	}
	if !strings.Contains(logged.String(), "panic serving") || !strings.Contains(logged.String(), "boom") {
		t.Errorf("log: %q", logged.String())
	}
	_, br = raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, body := readResponse(t, br, http.MethodGet); body != "fine" {
		t.Errorf("after the panic: %q", body)
	}
}

// A client that stops sending in the middle of a request is cut off at
// ReadTimeout; one that stays idle between requests at IdleTimeout.
func TestTimeouts(t *testing.T) {
	_, addr := start(t, echo, func(s *Server) {
		s.ReadTimeout = 50 * time.Millisecond
		s.IdleTimeout = 50 * time.Millisecond
	})
	for _, req := range []string{"GET / HTTP/1.1\r\nHost: a\r\n", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", ""} {
		c, br := raw(t, addr, req)
		c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound for a broken server, not a measure
		if _, err := io.ReadAll(br); err != nil {
			t.Errorf("%q: %v, want the server to close", req, err)
		}
	}
}

// An HTTP/1.0 request with Transfer-Encoding has faulty framing (RFC 9112
// section 6.1): it is refused and the connection closed, whatever its
// Connection header says, so that its chunks are never read as a request
// of their own.
func TestHTTP10WithTransferEncodingCloses(t *testing.T) {
	var served []string
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.Method+" "+r.URL.Path)
	}))
	for _, te := range []string{"Transfer-Encoding: chunked", "transfer-encoding: chunked", "TRANSFER-ENCODING:  gzip, chunked"} {
		smuggled := "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
		body := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled)
		_, br := raw(t, addr, "POST /mcp HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n"+te+"\r\n\r\n"+body)
		resp, _ := readResponse(t, br, http.MethodPost)
		if resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Errorf("%s: %s, close %v; want 400 and the connection closed", te, resp.Status, resp.Close)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: after the answer: %v, want EOF", te, err)
		}
	}
	if len(served) > 0 {
		t.Errorf("the handler served %q", served)
	}
}

// A request with both Transfer-Encoding and Content-Length is framed by
// its chunks, and the connection closes after the answer (RFC 9112
// section 6.3): a peer that framed it by its Content-Length would read
// what follows otherwise.
func TestTransferEncodingAndContentLengthClose(t *testing.T) {
	var served []string
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		served = append(served, r.URL.Path+" "+string(b))
	}))
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
	_, br := raw(t, addr, "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(len("3\r\nabc\r\n0\r\n\r\n")+len(smuggled))+
		"\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"+smuggled)
	resp, _ := readResponse(t, br, http.MethodPost)
	if !resp.Close {
		t.Errorf("the answer keeps the connection open")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: %v, want EOF", err)
	}
	if len(served) != 1 || served[0] != "/mcp abc" {
		t.Errorf("the handler served %q, want the chunked body alone", served)
	}
}
