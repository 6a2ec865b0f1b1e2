package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// scripted is a Streamable HTTP server written for the failure cases no
// real server shows on demand. It records what it is sent.
type scripted struct {
	posts    testutil.Recorder[string] // methods (or "response") posted
	lastIDs  testutil.Recorder[string] // Last-Event-ID of each GET
	status   atomic.Int32              // if set, the answer to every request
	dropGETs atomic.Bool               // GET streams send one event and end
	hangPing atomic.Bool               // ping is never answered
	events   atomic.Int32              // ids of the events sent on GET streams
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code := s.status.Load(); code != 0 {
		http.Error(w, "scripted failure", int(code))
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, r)
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		s.post(w, r)
	}
}

func (s *scripted) get(w http.ResponseWriter, r *http.Request) {
	s.lastIDs.Add(r.Header.Get("Last-Event-Id"))
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	if !s.dropGETs.Load() {
		<-r.Context().Done()
		return
	}
	fmt.Fprintf(w, "id: %d\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n", s.events.Add(1))
	// The stream ends here, as a proxy's timeout would end it.
}

func (s *scripted) post(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.IsResponse() {
		s.posts.Add("response")
	} else {
		s.posts.Add(msg.Method)
	}
	if !msg.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	json := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "scripted-1")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}
	switch msg.Method {
	case "ping":
		if s.hangPing.Load() {
			<-r.Context().Done()
			return
		}
		json(`{}`)
	case "initialize":
		json(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"scripted","version":"1"}}`)
	case "tools/list":
		json(`{"tools":[{"name":"json","inputSchema":{"type":"object"}},{"name":"sse","inputSchema":{"type":"object"}},{"name":"slow","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		name, _, _ := jsonrpc.LookupPath(msg.Params, "name")
		switch string(name) {
		case `"sse"`:
			// An event stream: a progress notification first, then the
			// result, with a CR LF line ending for good measure.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\r\n\r\n")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"from sse\"}]}}\n\n", msg.ID)
		case `"slow"`:
			<-r.Context().Done() // never answers; the client gives up
			s.posts.Add("slow ended by the client")
		case `"hold"`:
			time.Sleep(50 * time.Millisecond) // answers, after a while
			json(`{"content":[{"type":"text","text":"held"}]}`)
		default:
			json(`{"content":[{"type":"text","text":"from json"}]}`)
		}
	default:
		json(`{}`)
	}
}

// serveScripted starts s and returns its endpoint.
func serveScripted(t *testing.T, s *scripted) string {
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// awaitItem waits until rec holds an item that satisfies match.
func awaitItem(t *testing.T, rec *testutil.Recorder[string], what string, match func(string) bool) {
	t.Helper()
	var i int
	if !rec.Within(wait, testutil.Index(0, match, &i)) {
		t.Fatalf("never saw %s; saw %q", what, rec.All())
	}
}

func is(want string) func(string) bool { return func(s string) bool { return s == want } }

// A server that cannot be reached is a backend that cannot start: it is
// retried with the backoff and fails after max_restarts, like a command
// that does not exist.
func TestRemoteBackendConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := runRemote(t, remoteConfig("http://"+addr+"/mcp"), "")
	r.await(t, "retrying", func(st Status) bool { return st.State == Starting && st.Retrying })
	st := r.await(t, "failed", func(st Status) bool { return st.State == Failed })
	if !strings.Contains(st.LastError, "connection refused") || !strings.Contains(st.LastError, "gave up after 3 restarts") {
		t.Errorf("LastError = %q, want connection refused and the restarts", st.LastError)
	}
}

// A server error (5xx) at the start is a failed start, retried with the
// backoff; once the server is back the backend becomes healthy by itself.
func TestRemoteBackendServerErrorThenRecovers(t *testing.T) {
	s := &scripted{}
	s.status.Store(http.StatusServiceUnavailable)
	cfg := remoteConfig(serveScripted(t, s))
	cfg.MaxRestarts = 1000
	r := runRemote(t, cfg, "")
	st := r.await(t, "retrying after HTTP 503", func(st Status) bool { return st.Retrying && strings.Contains(st.LastError, "HTTP 503") })
	if st.State != Starting {
		t.Errorf("state %s while retrying, want starting", st.State)
	}
	s.status.Store(0)
	r.await(t, "healthy", healthy)
}

// The server's GET stream, when it drops, is re-opened with Last-Event-ID
// so that nothing sent meanwhile is lost; what it carried is acted on.
func TestRemoteBackendReopensEventStream(t *testing.T) {
	s := &scripted{}
	s.dropGETs.Store(true)
	r := runRemote(t, remoteConfig(serveScripted(t, s)), "")
	r.await(t, "healthy", healthy)
	awaitItem(t, &s.lastIDs, "a GET resuming after event 1", is("1"))
	awaitItem(t, &s.lastIDs, "a GET resuming after event 2", is("2"))
	if got := s.lastIDs.All()[0]; got != "" {
		t.Errorf("first GET had Last-Event-ID %q, want none", got)
	}
	// Each list_changed on the stream makes the backend read its tools
	// again.
	var n int
	s.posts.Within(wait, func(items []string) bool {
		n = 0
		for _, m := range items {
			if m == "tools/list" {
				n++
			}
		}
		return n >= 2
	})
	if n < 2 {
		t.Errorf("tools/list read %d times, want a refresh after list_changed", n)
	}
	if st := r.b.Status(); st.State != Healthy {
		t.Errorf("state %s while the stream comes and goes, want healthy", st.State)
	}
}

// A server may answer a POST with plain JSON or with an event stream that
// carries notifications before the response; both work.
func TestRemoteBackendJSONAndEventStreamAnswers(t *testing.T) {
	s := &scripted{}
	r := runRemote(t, remoteConfig(serveScripted(t, s)), "")
	r.await(t, "healthy", healthy)
	for _, tc := range []struct{ tool, want string }{{"json", "from json"}, {"sse", "from sse"}} {
		res, err := r.call(t, tc.tool, `{}`)
		if err != nil || !strings.Contains(string(res), tc.want) {
			t.Errorf("%s = %s, %v; want %q", tc.tool, res, err, tc.want)
		}
	}
	awaitItem(t, &r.h.notes, "the progress sent before the result", is("notifications/progress"))
}

// A call that outlives its deadline is abandoned: the server is told with
// notifications/cancelled and the request's connection is closed, and the
// backend goes on serving.
func TestRemoteBackendSlowCallTimesOut(t *testing.T) {
	s := &scripted{}
	r := runRemote(t, remoteConfig(serveScripted(t, s)), "")
	r.await(t, "healthy", healthy)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := r.b.Conn().Call(ctx, "tools/call", []byte(`{"name":"slow","arguments":{}}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call = %v, want the deadline", err)
	}
	awaitItem(t, &s.posts, "notifications/cancelled", is("notifications/cancelled"))
	awaitItem(t, &s.posts, "the slow request's connection closed", is("slow ended by the client"))
	if res, err := r.call(t, "json", `{}`); err != nil || !strings.Contains(string(res), "from json") {
		t.Errorf("call after the timeout = %s, %v", res, err)
	}
}

// A server that goes away while healthy ends the session: the backend
// leaves healthy and retries, as for a child that died.
func TestRemoteBackendServerGoesAway(t *testing.T) {
	s := &scripted{}
	ts := httptest.NewServer(s)
	defer ts.Close()
	cfg := remoteConfig(ts.URL + "/mcp")
	cfg.MaxRestarts = 1000
	r := runRemote(t, cfg, "")
	r.await(t, "healthy", healthy)
	// The listener first: a connection accepted between the two (the
	// event stream reopening) would otherwise stay open.
	ts.Listener.Close()
	ts.CloseClientConnections()
	r.await(t, "retrying after the server went away", func(st Status) bool {
		return st.State == Starting && st.Retrying && strings.Contains(st.LastError, "connection refused")
	})
}

// A remote backend gets the health checks and circuit breaker of any
// backend: a server that stops answering pings becomes unhealthy, its
// session is dropped and started again, and it is healthy once it answers.
func TestRemoteBackendHealthChecks(t *testing.T) {
	s := &scripted{}
	cfg := remoteConfig(serveScripted(t, s))
	cfg.MaxRestarts = 1000
	cfg.Health = config.Health{HealthInterval: 50 * time.Millisecond, HealthTimeout: 50 * time.Millisecond, FailureThreshold: 2, RecoveryMultiplier: 1}
	r := runRemote(t, cfg, "")
	r.await(t, "healthy", healthy)
	from := r.states.Len()
	s.hangPing.Store(true)
	var i int
	if !r.states.Within(wait, testutil.Index(from, func(st Status) bool { return st.State == Unhealthy }, &i)) {
		t.Fatalf("never unhealthy while pings hang; last %+v", r.b.Status())
	}
	if !r.states.Within(wait, testutil.Index(i, func(st Status) bool { return st.State == Starting }, &i)) {
		t.Fatalf("session never restarted after the half-open check failed; last %+v", r.b.Status())
	}
	s.hangPing.Store(false)
	if !r.states.Within(wait, testutil.Index(i, healthy, &i)) {
		t.Fatalf("never healthy again; last %+v", r.b.Status())
	}
}

// max_connections bounds the connections to the server: over HTTP/1.1
// the event stream holds one, and calls beyond the rest wait for one.
func TestRemoteBackendBoundsConnections(t *testing.T) {
	s := &scripted{}
	ts := httptest.NewUnstartedServer(s)
	var open, most atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			n := open.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	cfg := remoteConfig(ts.URL + "/mcp")
	cfg.MaxConnections = 2
	r := runRemote(t, cfg, "")
	r.await(t, "healthy", healthy)
	awaitItem(t, &s.lastIDs, "the event stream open", is(""))
	// Calls that are answered, not abandoned: an abandoned call closes its
	// connection, and the server would see that close only after the
	// client has opened the next one.
	done := make(chan error, 3)
	for range 3 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := r.b.Conn().Call(ctx, "tools/call", []byte(`{"name":"hold","arguments":{}}`))
			done <- err
		}()
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("held call = %v", err)
		}
	}
	if n := most.Load(); n > 2 {
		t.Errorf("%d connections open at once, want at most max_connections = 2", n)
	}
	if res, err := r.call(t, "json", `{}`); err != nil || !strings.Contains(string(res), "from json") {
		t.Errorf("call after the slow ones = %s, %v", res, err)
	}
}
