package backend

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
)

// hostile is a remote MCP server that lies: its tools answer with events
// and bodies larger than the limit, events that never end, redirects to
// another origin; as a legacy (HTTP+SSE) server it can name another
// origin as its endpoint. Only what no real server does on demand.
type hostile struct {
	max      int         // the client's max_message_bytes
	other    string      // the URL of another origin
	endpoint string      // the legacy endpoint it names; "" for its own
	stream   chan string // events for its open GET stream
}

// elsewhere is a server of another origin that records every request and
// whether one carried a credential header.
type elsewhere struct {
	url                   string
	requests, credentials atomic.Int32
}

func (e *elsewhere) origin() string { return mcphttp.OriginOf(e.url) }

// originOf is the origin of ref relative to base.
func originOf(t *testing.T, ref, base string) string {
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := url.Parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	return mcphttp.Origin(b.ResolveReference(r))
}

func (e *elsewhere) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
		e.credentials.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
}

// serveHostile starts a hostile server and a server of another origin.
func serveHostile(t *testing.T, max int) (*hostile, *elsewhere, string) {
	other := &elsewhere{}
	ots := httptest.NewServer(other)
	t.Cleanup(ots.Close)
	other.url = ots.URL
	h := &hostile{max: max, other: ots.URL, stream: make(chan string, 16)}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return h, other, ts.URL
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if r.URL.Path == "/sse" {
			fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", cmpOr(h.endpoint, "/messages"))
		}
		w.(http.Flusher).Flush()
		for {
			select {
			case ev := <-h.stream:
				io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil || !msg.IsRequest() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if r.URL.Path == "/messages" { // legacy: every answer comes on the stream
			w.WriteHeader(http.StatusAccepted)
			h.stream <- "data: " + h.answer(msg) + "\n\n"
			return
		}
		h.post(w, r, msg)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// answer is the plain answer to a request, as one line of JSON: for the
// legacy stream, and for what is not a hostile call.
func (h *hostile) answer(msg *jsonrpc.Message) string {
	result := `{}`
	switch msg.Method {
	case "initialize":
		result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`
	case "tools/list":
		result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
	case "tools/call":
		if name, _, _ := jsonrpc.LookupPath(msg.Params, "name"); string(name) == `"big"` {
			// A response with its id first, as servers write them, and a
			// text far over the limit.
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}`, msg.ID, strings.Repeat("x", 3*h.max))
		}
		result = `{"content":[{"type":"text","text":"fine"}]}`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
}

// post answers a Streamable HTTP request; tools/call's name says how.
func (h *hostile) post(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	name, _, _ := jsonrpc.LookupPath(msg.Params, "name")
	sse := func() {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	line := strings.Repeat("y", 60<<10)
	switch string(name) {
	case `"big-lines"`: // one event of many data lines, over the limit
		sse()
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\n", msg.ID)
		for n := 0; n < 3*h.max; n += len(line) {
			if _, err := fmt.Fprintf(w, "data: %s\n", line); err != nil {
				return
			}
		}
		io.WriteString(w, "data: \"}]}}\n\n")
	case `"big-line"`: // one event of one line over the limit
		sse()
		io.WriteString(w, "data: "+h.answer(&jsonrpc.Message{ID: msg.ID, Method: "tools/call", Params: []byte(`{"name":"big"}`)})+"\n\n")
	case `"big-json"`:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, h.answer(&jsonrpc.Message{ID: msg.ID, Method: "tools/call", Params: []byte(`{"name":"big"}`)}))
	case `"endless"`: // an event whose data lines never end
		sse()
		for {
			if _, err := fmt.Fprintf(w, "data: %s\n", line); err != nil {
				return // the client gave up
			}
		}
	case `"on-get"`: // accepted here, answered too large on the GET stream
		w.WriteHeader(http.StatusAccepted)
		h.stream <- "data: " + h.answer(&jsonrpc.Message{ID: msg.ID, Method: "tools/call", Params: []byte(`{"name":"big"}`)}) + "\n\n"
	case `"redirect"`:
		http.Redirect(w, r, h.other+"/mcp", http.StatusTemporaryRedirect)
	default:
		if msg.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "hostile-1")
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, h.answer(msg))
	}
}

// hostileConfig is a remote backend of srv with a credential header from
// a credentials directory it returns.
func hostileConfig(t *testing.T, url string) (cfg *config.Backend, creds string) {
	creds = t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "key"), []byte("k3y-0f-the-backend\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = remoteConfig(url)
	cfg.Headers = map[string]string{"X-Api-Key": "${credential:key}", "Authorization": "Bearer ${credential:key}"}
	return cfg, creds
}

// Every answer of a remote server is bounded by max_message_bytes, however
// it is shaped: the call it belongs to fails with ErrTooLarge (which the
// gateway answers with -32004), the drop is logged, and the backend goes
// on serving. An event that never ends fails as soon as it passes the
// limit.
func TestRemoteBackendBoundsAnswers(t *testing.T) {
	_, _, url := serveHostile(t, 1<<20)
	cfg, creds := hostileConfig(t, url+"/mcp")
	r := runRemote(t, cfg, creds)
	r.await(t, "healthy", healthy)
	for _, tool := range []string{"big-lines", "big-line", "big-json", "endless", "on-get"} {
		t.Run(tool, func(t *testing.T) {
			_, err := r.call(t, tool, `{}`)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "max_message_bytes") {
				t.Fatalf("%s = %v, want ErrTooLarge naming max_message_bytes", tool, err)
			}
			if res, err := r.call(t, "echo", `{}`); err != nil || !strings.Contains(string(res), "fine") {
				t.Errorf("call after %s = %s, %v", tool, res, err)
			}
		})
	}
	if st := r.b.Status(); st.State != Healthy || st.Restarts != 0 {
		t.Errorf("status after the large answers = %s with %d restarts; want healthy", st.State, st.Restarts)
	}
	if logged := strings.Join(r.logs.Messages(), "\n"); !strings.Contains(logged, "dropped a message from the server") {
		t.Errorf("no drop was logged:\n%s", logged)
	}
}

// A redirect to another origin fails the call with an error that names
// it; the other origin gets nothing, credentials least of all.
func TestRemoteBackendRefusesRedirectToAnotherOrigin(t *testing.T) {
	_, other, url := serveHostile(t, 1<<20)
	cfg, creds := hostileConfig(t, url+"/mcp")
	r := runRemote(t, cfg, creds)
	r.await(t, "healthy", healthy)
	_, err := r.call(t, "redirect", `{}`)
	// The client reads a fixed cause; the journal, the origin.
	if err == nil || err.Error() != `backend "r": redirected to another origin (refused)` {
		t.Fatalf("redirected call = %v, want the fixed cause of a refused redirect", err)
	}
	var redirect *mcphttp.RedirectError
	if !errors.As(err, &redirect) || !strings.Contains(redirect.Error(), other.origin()) {
		t.Fatalf("redirected call = %v, want it to wrap a RedirectError naming %s", err, other.origin())
	}
	if n := other.requests.Load(); n != 0 {
		t.Errorf("the other origin got %d requests, %d with a credential", n, other.credentials.Load())
	}
	if res, err := r.call(t, "echo", `{}`); err != nil || !strings.Contains(string(res), "fine") {
		t.Errorf("call after the redirect = %s, %v", res, err)
	}
	if logged := strings.Join(r.logs.Messages(), "\n"); !strings.Contains(logged, "refused a redirect to another origin") || !strings.Contains(logged, other.origin()) {
		t.Errorf("the refusal was not logged:\n%s", logged)
	}
}

// The legacy transport's endpoint event must name the configured origin:
// another one ends the session with an error that names both, and
// nothing is posted there.
func TestRemoteBackendLegacyEndpointOrigin(t *testing.T) {
	for _, tc := range []struct{ name, endpoint string }{
		{"another port", "OTHER/messages"},
		{"scheme-relative", "//localhost:1/messages"},
		{"https on the same host and port", "https://HOST/messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, other, url := serveHostile(t, 1<<20)
			host := strings.TrimPrefix(url, "http://")
			h.endpoint = strings.NewReplacer("OTHER", other.url, "HOST", host).Replace(tc.endpoint)
			cfg, creds := hostileConfig(t, url+"/sse")
			cfg.Transport = "sse"
			r := runRemote(t, cfg, creds)
			want := originOf(t, h.endpoint, url)
			st := r.await(t, "failing for the endpoint", func(st Status) bool { return strings.Contains(st.LastError, "endpoint") })
			if !strings.Contains(st.LastError, want) || !strings.Contains(st.LastError, url) || !strings.Contains(st.LastError, "another origin") {
				t.Errorf("LastError = %q, want it to name %s and %s", st.LastError, want, url)
			}
			if n := other.requests.Load(); n != 0 {
				t.Errorf("the other origin got %d requests, %d with a credential", n, other.credentials.Load())
			}
		})
	}
}

// The legacy stream bounds its events too: an answer too large fails its
// call (its id comes first) and the stream goes on.
func TestRemoteBackendLegacyBoundsEvents(t *testing.T) {
	_, _, url := serveHostile(t, 1<<20)
	cfg, creds := hostileConfig(t, url+"/sse")
	cfg.Transport = "sse"
	r := runRemote(t, cfg, creds)
	r.await(t, "healthy", healthy)
	if _, err := r.call(t, "big", `{}`); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("big = %v, want ErrTooLarge", err)
	}
	if res, err := r.call(t, "echo", `{}`); err != nil || !strings.Contains(string(res), "fine") {
		t.Errorf("call after the large answer = %s, %v", res, err)
	}
}

// A remote backend is shown by its URL's origin, since its path may carry
// a key, or by its display_url; the path shows in no status or log line.
func TestRemoteBackendDisplayURL(t *testing.T) {
	const pathKey = "k3y-in-the-path-0815"
	_, _, url := serveHostile(t, 1<<20)
	for _, tc := range []struct{ display, want string }{{"", url}, {"https://shown.example/mcp", "https://shown.example/mcp"}} {
		cfg, creds := hostileConfig(t, url+"/mcp/"+pathKey)
		cfg.DisplayURL = tc.display
		r := runRemote(t, cfg, creds)
		if st := r.await(t, "healthy", healthy); st.URL != tc.want {
			t.Errorf("display_url %q: URL shown = %q, want %q", tc.display, st.URL, tc.want)
		}
		for _, line := range r.logs.Messages() {
			if strings.Contains(line, pathKey) {
				t.Errorf("log line holds the URL's path: %s", line)
			}
		}
	}
}

// A server can cause warnings without end: those of one kind are
// journaled at most misbehavedPerKey times a minute, the last saying that
// the rest are counted, and every call still fails as it should.
func TestServerCausedWarningsAreRateLimited(t *testing.T) {
	_, _, url := serveHostile(t, 1<<20)
	cfg, creds := hostileConfig(t, url+"/mcp")
	r := runRemote(t, cfg, creds)
	r.await(t, "healthy", healthy)
	for i := 0; i < misbehavedPerKey+5; i++ {
		if _, err := r.call(t, "redirect", `{}`); err == nil {
			t.Fatalf("redirected call %d succeeded", i)
		}
	}
	var logged []string
	for _, line := range r.logs.Messages() {
		if strings.Contains(line, "refused a redirect to another origin") {
			logged = append(logged, line)
		}
	}
	if len(logged) != misbehavedPerKey {
		t.Fatalf("%d refusals journaled of %d, want %d:\n%s", len(logged), misbehavedPerKey+5, misbehavedPerKey, strings.Join(logged, "\n"))
	}
	if !strings.Contains(logged[len(logged)-1], "counted, not logged") {
		t.Errorf("the last refusal journaled does not say the rest are counted: %s", logged[len(logged)-1])
	}
}
