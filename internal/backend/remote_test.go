package backend

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// wait bounds every await of these tests; it is a deadline, not a
// measurement.
const wait = 15 * time.Second

// remoteRun is a remote backend supervised by Run for one test.
type remoteRun struct {
	b      *Backend
	states testutil.Recorder[Status]
	logs   *testutil.LogRecorder
	h      *recordingHandler
}

// recordingHandler records what the server sends on its own and answers
// sampling requests.
type recordingHandler struct {
	notes testutil.Recorder[string]
}

func (h *recordingHandler) Notification(_ *Backend, _ *Conn, msg *jsonrpc.Message) {
	h.notes.Add(msg.Method)
}

func (h *recordingHandler) Exited(*Backend, *Conn) { h.notes.Add("exited") }

func (h *recordingHandler) Request(_ *Backend, c *Conn, msg *jsonrpc.Message) {
	h.notes.Add(msg.Method)
	switch msg.Method {
	case "sampling/createMessage":
		c.Reply(msg.ID, json.RawMessage(`{"role":"assistant","model":"m","content":{"type":"text","text":"sampled"}}`))
	default:
		c.ReplyError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no"))
	}
}

// remoteConfig is a remote backend's configuration with quick restarts.
func remoteConfig(url string) *config.Backend {
	return &config.Backend{
		Name: "r", Enabled: true, Timeout: 10 * time.Second, ToolPrefix: "r__",
		MaxRestarts: 3, RestartWindow: time.Minute,
		RestartBackoffInitial: 20 * time.Millisecond, RestartBackoffMax: 100 * time.Millisecond,
		RelayClientRequests: true,
		Transport:           "streamable-http",
		Remote:              config.Remote{URL: url, MaxConnections: 4},
	}
}

// runRemote runs a backend for cfg until the test ends.
func runRemote(t *testing.T, cfg *config.Backend, credentials string) *remoteRun {
	t.Helper()
	r := &remoteRun{logs: &testutil.LogRecorder{}, h: &recordingHandler{}}
	r.b = New(cfg, Options{
		Version: "test", GracePeriod: time.Second, MaxMessageBytes: 1 << 20,
		CredentialsDirectory: credentials,
		Handler:              r.h,
		Logger:               slog.New(r.logs),
		OnChange:             func(b *Backend) { r.states.Add(b.Status()) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// await waits for a status that satisfies cond.
func (r *remoteRun) await(t *testing.T, what string, cond func(Status) bool) Status {
	t.Helper()
	var found int
	if !r.states.Within(wait, testutil.Index(0, cond, &found)) {
		t.Fatalf("backend never was %s; last status %+v", what, r.b.Status())
	}
	return r.states.All()[found]
}

func healthy(st Status) bool { return st.State == Healthy }

// call calls a tool on the running backend and returns the raw result.
func (r *remoteRun) call(t *testing.T, name string, args string) (json.RawMessage, error) {
	t.Helper()
	conn := r.b.Conn()
	if conn == nil {
		t.Fatalf("backend is %s, not serving", r.b.Status().State)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return conn.Call(ctx, "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":`+args+`}`))
}

// sdkServer is the official Go SDK serving MCP with an echo tool, a tool
// that asks the client to sample, and one that reports progress.
func sdkServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-peer", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	return srv
}

// serveSDK serves srv over Streamable HTTP (or the legacy SSE transport)
// and returns its MCP endpoint.
func serveSDK(t *testing.T, srv *mcp.Server, legacy bool, wrap func(http.Handler) http.Handler) string {
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if legacy {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func TestRemoteBackendAgainstGoSDK(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string
	}{
		{"streamable HTTP", "streamable-http"},
		{"legacy SSE", "sse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sdkServer()
			url := serveSDK(t, srv, tc.transport == "sse", nil)
			cfg := remoteConfig(url)
			cfg.Transport = tc.transport
			r := runRemote(t, cfg, "")
			st := r.await(t, "healthy", healthy)
			if st.URL != mcphttp.OriginOf(url) || st.PID != 0 || st.Server == nil || st.Server.Name != "sdk-peer" {
				t.Errorf("status = %+v, want URL %s, no PID, server sdk-peer", st, mcphttp.OriginOf(url))
			}
			if n := len(r.b.Lists().Tools); n != 2 {
				t.Errorf("%d tools listed, want 2", n)
			}
			res, err := r.call(t, "echo", `{"text":"over http"}`)
			if err != nil || !strings.Contains(string(res), "over http") {
				t.Fatalf("echo = %s, %v", res, err)
			}
			// A request from the server during a call (sampling) reaches
			// the handler, and its answer reaches the server.
			res, err = r.call(t, "sample", `{}`)
			if err != nil || !strings.Contains(string(res), "sampled") {
				t.Fatalf("sample = %s, %v", res, err)
			}
			// A tool added later is announced with list_changed on the
			// server's own stream, and the lists follow.
			mcp.AddTool(srv, &mcp.Tool{Name: "late"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
			deadline := time.Now().Add(wait)
			for len(r.b.Lists().Tools) != 3 {
				if time.Now().After(deadline) {
					t.Fatalf("lists never showed the tool added later: %d tools", len(r.b.Lists().Tools))
				}
				r.states.Within(time.Second, func(s []Status) bool { return len(r.b.Lists().Tools) == 3 })
			}
		})
	}
}

// An upstream 404 means the server forgot the session: a new one is
// started and the call sent again, once, and the client never sees it.
func TestRemoteBackendRenewsExpiredSession(t *testing.T) {
	var expired atomic.Value // the session id that now gets 404
	expired.Store("")
	var inits atomic.Int32
	var subscribed testutil.Recorder[string]
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-peer", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			subscribed.Add(req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	srv.AddResource(&mcp.Resource{URI: "file:///watched", Name: "watched"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	url := serveSDK(t, srv, false, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if id := req.Header.Get("Mcp-Session-Id"); id != "" && id == expired.Load().(string) {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" && req.Header.Get("Mcp-Method") != "server/discover" {
				inits.Add(1)
			}
			next.ServeHTTP(w, req)
		})
	})
	r := runRemote(t, remoteConfig(url), "")
	r.await(t, "healthy", healthy)
	conn := r.b.Conn()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := conn.Call(ctx, "resources/subscribe", json.RawMessage(`{"uri":"file:///watched"}`)); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	first := conn.remote.client.Session().ID
	if first == "" {
		t.Fatal("no session id kept")
	}
	expired.Store(first)
	res, err := r.call(t, "echo", `{"text":"after expiry"}`)
	if err != nil || !strings.Contains(string(res), "after expiry") {
		t.Fatalf("echo after expiry = %s, %v", res, err)
	}
	if n := inits.Load(); n != 2 {
		t.Errorf("%d sessions started, want 2", n)
	}
	if got := conn.remote.client.Session().ID; got == first || got == "" {
		t.Errorf("session id %q after renewal, want a new one", got)
	}
	// The new session is subscribed again: the gateway never saw the
	// renewal and will not repeat the subscription itself.
	awaitItem(t, &subscribed, "the subscription repeated to the new session", func(string) bool { return subscribed.Len() == 2 })
	if st := r.b.Status(); st.State != Healthy || st.Restarts != 0 {
		t.Errorf("status after renewal = %s with %d restarts; want healthy without a restart", st.State, st.Restarts)
	}
}

// A header's ${credential:NAME} is filled in from the credentials
// directory and sent, and its value appears in no log line, status or
// error, even when the server refuses it.
func TestRemoteBackendCredentialHeader(t *testing.T) {
	const secret = "s3cr3t-token-value"
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "tok"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		accept bool
	}{{"accepted", true}, {"refused", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var seen atomic.Value
			seen.Store("")
			url := serveSDK(t, sdkServer(), false, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					seen.Store(req.Header.Get("Authorization"))
					if !tc.accept {
						w.Header().Set("WWW-Authenticate", "Bearer")
						http.Error(w, "bad token "+req.Header.Get("Authorization"), http.StatusUnauthorized)
						return
					}
					next.ServeHTTP(w, req)
				})
			})
			cfg := remoteConfig(url + "?key=" + secret)
			cfg.Headers = map[string]string{"Authorization": "Bearer ${credential:tok}"}
			r := runRemote(t, cfg, creds)
			if tc.accept {
				r.await(t, "healthy", healthy)
			} else {
				r.await(t, "failing with 401", func(st Status) bool { return strings.Contains(st.LastError, "401") })
			}
			if got := seen.Load().(string); got != "Bearer "+secret {
				t.Errorf("server saw Authorization %q", got)
			}
			for _, line := range r.logs.Messages() {
				if strings.Contains(line, secret) {
					t.Errorf("log line holds the credential: %s", line)
				}
			}
			for _, st := range r.states.All() {
				if strings.Contains(st.LastError, secret) || strings.Contains(st.URL, secret) {
					t.Errorf("status holds the credential: %+v", st)
				}
			}
		})
	}
}
