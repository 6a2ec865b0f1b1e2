package backend

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testing/modernserver"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// stdioConfig is a child backend's configuration with quick restarts.
func stdioConfig(argv []string, env map[string]string) *config.Backend {
	return &config.Backend{
		Name: "m", Enabled: true, Timeout: 20 * time.Second, ToolPrefix: "m__",
		Command: argv[0], Args: argv[1:], Env: env,
		MaxRestarts: 3, RestartWindow: time.Minute,
		RestartBackoffInitial: 20 * time.Millisecond, RestartBackoffMax: 100 * time.Millisecond,
		RelayClientRequests: true,
	}
}

// toolCount is a condition on the backend's lists, checked on every
// change of its status or lists.
func (r *remoteRun) awaitTools(t *testing.T, n int) {
	t.Helper()
	if !r.states.Within(wait, func([]Status) bool { return len(r.b.Lists().Tools) == n }) {
		t.Fatalf("the backend never listed %d tools; it lists %d", n, len(r.b.Lists().Tools))
	}
}

// checkModern checks what a backend of the 2026-07-28 fixture serves:
// its era, its lists, a call, an input_required result carried through
// unchanged, and a list change learned through subscriptions/listen.
func checkModern(t *testing.T, r *remoteRun) {
	t.Helper()
	st := r.await(t, "healthy", healthy)
	if st.Server.Era() != EraModern || st.Server.ProtocolVersion != ModernProtocolVersion || st.Server.Name != "modern-fixture" {
		t.Fatalf("server = %+v (era %s); want the modern fixture, era modern", st.Server, st.Server.Era())
	}
	if !r.b.Conn().Modern() {
		t.Error("the connection does not speak 2026-07-28")
	}
	if n := len(r.b.Lists().Tools); n != 5 {
		t.Errorf("%d tools listed, want 5", n)
	}
	res, err := r.call(t, "echo", `{"text":"stateless"}`)
	if err != nil || !strings.Contains(string(res), "echo: stateless") {
		t.Fatalf("echo = %s, %v", res, err)
	}
	res, err = r.call(t, "confirm", `{"action":"deploy"}`)
	if err != nil || !strings.Contains(string(res), `"resultType":"input_required"`) || !strings.Contains(string(res), `"elicitation/create"`) {
		t.Fatalf("confirm = %s, %v; want an input_required result asking for an elicitation", res, err)
	}
	if _, err := r.call(t, "add_tool", `{"name":"late"}`); err != nil {
		t.Fatal(err)
	}
	r.awaitTools(t, 6)
	// resources/subscribe, which 2026-07-28 has not, becomes a
	// resourceSubscriptions of the listen stream.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if res, err := r.b.Conn().Call(ctx, "resources/subscribe", json.RawMessage(`{"uri":"note://one"}`)); err != nil || string(res) != "{}" {
		t.Fatalf("resources/subscribe = %s, %v", res, err)
	}
	if _, err := r.call(t, "touch", `{}`); err != nil {
		t.Fatal(err)
	}
	awaitItem(t, &r.h.notes, "notifications/resources/updated", func(m string) bool { return m == "notifications/resources/updated" })
}

// A stdio server that answers server/discover with 2026-07-28 is a modern
// backend: no initialize, _meta on every request, lists refreshed through
// subscriptions/listen. A restart probes again.
func TestEraModernStdioBackend(t *testing.T) {
	argv, env := modernserver.Stdio(t)
	r := runRemote(t, stdioConfig(argv, env), "")
	checkModern(t, r)
	old := r.b.Conn()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := r.b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c := r.b.Conn(); c == old || c == nil || !c.Modern() {
		t.Errorf("after a restart the connection is %p (old %p), modern %v; want a new modern one", c, old, c != nil && c.Modern())
	}
}

// headerLog records the MCP headers of every request a proxy passes on.
type headerLog struct {
	mu   sync.Mutex
	reqs []http.Header
}

func (l *headerLog) all() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.reqs...)
}

// recordingProxy passes every request to target and records its headers.
func recordingProxy(t *testing.T, target string) (string, *headerLog) {
	return interceptingProxy(t, target, nil)
}

// interceptingProxy is recordingProxy where intercept, if set, may answer
// a request itself: it reports whether it did.
func interceptingProxy(t *testing.T, target string, intercept func(http.ResponseWriter, *http.Request) bool) (string, *headerLog) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	log := &headerLog{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1 // event streams pass at once
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		log.mu.Lock()
		log.reqs = append(log.reqs, req.Header.Clone())
		log.mu.Unlock()
		if intercept != nil && intercept(w, req) {
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + u.Path, log
}

// A remote server that answers server/discover with 2026-07-28 is used
// statelessly: every POST carries MCP-Protocol-Version, Mcp-Method and,
// for a call, Mcp-Name with the name the server knows, and no session.
func TestEraModernRemoteBackend(t *testing.T) {
	endpoint, log := recordingProxy(t, modernserver.HTTP(t))
	r := runRemote(t, remoteConfig(endpoint), "")
	checkModern(t, r)
	discovers := 0
	var call http.Header
	for _, h := range log.all() {
		if h.Get("Mcp-Session-Id") != "" {
			t.Errorf("a request carried a session id: %v", h)
		}
		if h.Get("Mcp-Protocol-Version") != ModernProtocolVersion || h.Get("Mcp-Method") == "" {
			t.Errorf("request headers %v; want MCP-Protocol-Version %s and Mcp-Method", h, ModernProtocolVersion)
		}
		switch h.Get("Mcp-Method") {
		case "server/discover":
			discovers++
		case "tools/call":
			if call == nil {
				call = h
			}
		case "initialize":
			t.Error("initialize was sent to a modern server")
		}
	}
	if discovers != 1 || call == nil || call.Get("Mcp-Name") != "echo" {
		t.Errorf("%d server/discover, first tools/call headers %v; want one probe and Mcp-Name echo", discovers, call)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := r.b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	discovers = 0
	for _, h := range log.all() {
		if h.Get("Mcp-Method") == "server/discover" {
			discovers++
		}
	}
	if discovers != 2 || !r.b.Conn().Modern() {
		t.Errorf("%d server/discover after a restart, modern %v; want the restart to probe again", discovers, r.b.Conn().Modern())
	}
}

// A modern server's health check is server/discover: 2026-07-28 has no
// ping.
func TestEraModernHealthCheck(t *testing.T) {
	endpoint, log := recordingProxy(t, modernserver.HTTP(t))
	cfg := remoteConfig(endpoint)
	cfg.Health.HealthInterval = 50 * time.Millisecond
	cfg.Health.HealthTimeout = 5 * time.Second
	cfg.Health.FailureThreshold = 3
	r := runRemote(t, cfg, "")
	r.await(t, "healthy", healthy)
	testutil.Eventually(t, wait, "a health check", func() bool { return !r.b.Health().LastCheck.IsZero() })
	if h := r.b.Health(); h.ConsecutiveFailures != 0 {
		t.Errorf("health %+v; want the check passed", h)
	}
	discovers := 0
	for _, h := range log.all() {
		switch h.Get("Mcp-Method") {
		case "ping":
			t.Error("a modern server got ping")
		case "server/discover":
			discovers++
		}
	}
	if discovers < 2 {
		t.Errorf("%d server/discover; want the probe and at least one health check", discovers)
	}
}

// A subscription stream that drops while the backend lives is opened
// again, and list changes arrive on the new one.
func TestEraModernRemoteSubscribesAgain(t *testing.T) {
	var listens atomic.Int32
	endpoint, _ := interceptingProxy(t, modernserver.HTTP(t), func(w http.ResponseWriter, req *http.Request) bool {
		if req.Header.Get("Mcp-Method") != "subscriptions/listen" || listens.Add(1) > 1 {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK) // and the stream ends at once
		return true
	})
	r := runRemote(t, remoteConfig(endpoint), "")
	r.await(t, "healthy", healthy)
	if !r.states.Within(wait, func([]Status) bool { return listens.Load() >= 2 }) {
		// OnChange fires on the refresh that comes with the new subscription.
		t.Fatalf("subscriptions/listen was sent %d times; want it sent again after the first stream dropped", listens.Load())
	}
	if _, err := r.call(t, "add_tool", `{"name":"later"}`); err != nil {
		t.Fatal(err)
	}
	r.awaitTools(t, 6)
}

// Published 2025 servers answer server/discover with an error: they are
// legacy backends, started with initialize as before.
func TestEraLegacyNpmServers(t *testing.T) {
	modules := filepath.Join(testutil.CacheDir(), "npm", "node_modules")
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"server-everything", []string{testutil.NpmServer(t, "mcp-server-everything"), "stdio"}},
		{"sequential-thinking 2025.11.25", []string{"node", filepath.Join(modules, "sequential-thinking-2025.11.25", "dist", "index.js")}},
		{"sequential-thinking 2025.12.18", []string{"node", filepath.Join(modules, "sequential-thinking-2025.12.18", "dist", "index.js")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRemote(t, stdioConfig(tc.argv, nil), "")
			st := r.await(t, "healthy", healthy)
			if st.Server.Era() != EraLegacy || st.Server.ProtocolVersion != ProtocolVersion || r.b.Conn().Modern() {
				t.Errorf("server = %+v (era %s); want legacy %s", st.Server, st.Server.Era(), ProtocolVersion)
			}
			if len(r.b.Lists().Tools) == 0 {
				t.Error("no tools listed")
			}
		})
	}
}

// A remote 2025 server (the Go SDK's) refuses server/discover without a
// session: it is legacy, with a session as before.
func TestEraLegacyRemoteBackend(t *testing.T) {
	endpoint, log := recordingProxy(t, serveSDK(t, sdkServer(), false, nil))
	r := runRemote(t, remoteConfig(endpoint), "")
	st := r.await(t, "healthy", healthy)
	if st.Server.Era() != EraLegacy || r.b.Conn().Modern() {
		t.Errorf("server = %+v (era %s); want legacy", st.Server, st.Server.Era())
	}
	if res, err := r.call(t, "echo", `{"text":"legacy"}`); err != nil || !strings.Contains(string(res), "legacy") {
		t.Fatalf("echo = %s, %v", res, err)
	}
	if r.b.Conn().remote.client.Session().ID == "" {
		t.Error("no session with the legacy server")
	}
	var methods []string
	for _, h := range log.all() {
		methods = append(methods, h.Get("Mcp-Method"))
	}
	if len(methods) == 0 || methods[0] != "server/discover" {
		t.Errorf("Mcp-Method of the requests: %q; want the probe first", methods)
	}
}

// legacyAfterProbe is a legacy shell child's handshake after a probe
// that got no answer it could use: initialize is id 2.
const legacyAfterProbe = `read -r line
echo '{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}'
exec cat >/dev/null
`

// Whatever else a server does with server/discover, it is legacy and
// starts with initialize: a result that is not a DiscoverResult, a line
// that is not JSON, no answer within health_timeout, or exiting (it is
// started again, spared the probe).
func TestEraProbeFallsBackToInitialize(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "probed")
	for _, tc := range []struct{ name, script string }{
		{"garbage result", `read -r line
echo '{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":"2026-07-28"}}'
` + legacyAfterProbe},
		{"not JSON", `read -r line
echo 'this is not JSON'
` + legacyAfterProbe},
		{"no answer", `read -r line
` + legacyAfterProbe},
		{"exits", `if [ -e ` + marker + ` ]; then
read -r line
echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}'
exec cat >/dev/null
fi
touch ` + marker + `
read -r line
exit 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := stdioConfig([]string{"sh", "-c", tc.script}, nil)
			cfg.Timeout = 2 * time.Second // the probe waits at most half of it
			r := runRemote(t, cfg, "")
			st := r.await(t, "healthy", healthy)
			if st.Server.Era() != EraLegacy || st.Server.Name != "sh" || r.b.Conn().Modern() {
				t.Errorf("server = %+v (era %s); want the legacy sh server", st.Server, st.Server.Era())
			}
		})
	}
}

// The _meta of a modern request is added to the client's params, which
// are otherwise kept byte for byte; the version is always mcpgate's, the
// capabilities and client info the caller's where it set them.
func TestWithMetaSplicesRawParams(t *testing.T) {
	b := testBackend(t, "true")
	b.opts.Version = "9"
	c := &Conn{b: b}
	meta := strings.TrimSuffix(strings.TrimPrefix(string(c.meta().object), "{"), "}")
	for _, tc := range []struct{ in, want string }{
		{``, `{"_meta":{` + meta + `}}`},
		{`null`, `{"_meta":{` + meta + `}}`},
		{`{}`, `{"_meta":{` + meta + `}}`},
		{`{"name":"x", "arguments":{"a" : 1}}`, `{"_meta":{` + meta + `},"name":"x", "arguments":{"a" : 1}}`},
		{`{"name":"x","_meta":{"progressToken":"t1"}}`, `{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}},"io.modelcontextprotocol/clientInfo":{"name":"mcpgate","version":"9"},"progressToken":"t1"}}`},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"}}}`,
			`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"}}}`},
		{`{"_meta":null}`, `{"_meta":{` + meta + `}}`},
	} {
		got, err := c.withMeta(json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("withMeta(%s) = %s, %v\nwant %s", tc.in, got, err, tc.want)
		}
		if err == nil && !json.Valid(got) {
			t.Errorf("withMeta(%s) is not valid JSON: %s", tc.in, got)
		}
	}
	if _, err := c.withMeta(json.RawMessage(`{"_meta":{},"_META":{}}`)); err == nil {
		t.Error("an ambiguous _meta was accepted")
	}
}

// BenchmarkWithMeta is the cost a call to a modern backend adds: the
// _meta spliced into its params.
func BenchmarkWithMeta(b *testing.B) {
	be := New(&config.Backend{Name: "t", Command: "true", RelayClientRequests: true}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c := &Conn{b: be}
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello, a little text to echo back"},"_meta":{"progressToken":"p1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.withMeta(params); err != nil {
			b.Fatal(err)
		}
	}
}

// The era follows the protocol version in use; a cli backend has none.
func TestServerInfoEra(t *testing.T) {
	for _, tc := range []struct {
		info *ServerInfo
		want string
	}{
		{nil, ""},
		{cliServer(), ""},
		{&ServerInfo{ProtocolVersion: "2025-06-18"}, "legacy"},
		{&ServerInfo{ProtocolVersion: ProtocolVersion}, "legacy"},
		{&ServerInfo{ProtocolVersion: ModernProtocolVersion}, "modern"},
	} {
		if got := tc.info.Era().String(); got != tc.want {
			t.Errorf("era of %+v = %q, want %q", tc.info, got, tc.want)
		}
	}
}
