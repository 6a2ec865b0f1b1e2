package http1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A Handover stops accepting and closes idle connections, as Shutdown
// does, but serves a connection accepted before the listener closed its
// first request (Shutdown would drop it, and its client see a reset),
// waits for the request in flight to be answered in full, and returns
// while an event stream (a GET, as the predicate says) is still open,
// which Close then ends.
func TestHandover(t *testing.T) {
	started := make(chan string, 3)
	release := make(chan struct{})
	s, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- r.URL.Path
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		case "/slow":
			<-release
		}
		io.WriteString(w, "answer of "+r.URL.Path)
	}))
	idle, idleBr := raw(t, addr, "GET /idle HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started
	readResponse(t, idleBr, http.MethodGet)
	stream, streamBr := raw(t, addr, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started
	_, slowBr := raw(t, addr, "POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
	<-started
	early, err := net.Dial("tcp", addr) // accepted, its request not yet sent
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	// The server has accepted it once it answers a request sent after it
	// on another connection: accepts are in order.
	_, probeBr := raw(t, addr, "GET /probe HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	<-started
	readResponse(t, probeBr, http.MethodGet)

	handed := make(chan error, 1)
	go func() {
		handed <- s.Handover(context.Background(), func(r *http.Request) bool { return r.Method == http.MethodGet })
	}()
	if _, err := idleBr.ReadByte(); err == nil {
		t.Error("the idle connection stayed open")
	}
	idle.Close()
	for { // the listener closes
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
	}
	if _, err := io.WriteString(early, "POST /early HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, body := readResponse(t, bufio.NewReader(early), http.MethodPost); body != "answer of /early" || !resp.Close {
		t.Errorf("the connection accepted before the handover: %q, close %v; want its answer, then the close", body, resp.Close)
	}
	select {
	case err := <-handed:
		t.Fatalf("Handover returned (%v) while a request was in flight", err)
	default:
	}
	close(release)
	if resp, body := readResponse(t, slowBr, http.MethodPost); body != "answer of /slow" || !resp.Close {
		t.Errorf("the request in flight: %q, close %v", body, resp.Close)
	}
	select {
	case err := <-handed:
		if err != nil {
			t.Fatalf("Handover: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Handover did not return while only an event stream was open")
	}
	readResponseHead(t, streamBr)
	s.Close()
	if _, err := io.ReadAll(streamBr); err != nil && err != io.EOF {
		t.Logf("stream ended with %v", err)
	}
	stream.Close()
}

// readResponseHead reads a streaming response's head.
func readResponseHead(t *testing.T, br *bufio.Reader) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
}
