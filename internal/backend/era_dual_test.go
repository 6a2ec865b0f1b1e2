package backend

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// sdkStdioEnv makes this test binary, started again with it set, serve
// sdkServer (the official Go SDK, which speaks both 2026-07-28 and
// 2025-11-25) over stdio instead of running the tests.
const sdkStdioEnv = "MCPGATE_TEST_SDK_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(sdkStdioEnv) == "1" {
		if err := sdkServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// goModern sends a request with GoModern and waits for its answer.
func goModern(t *testing.T, c *Conn, method, params string) (*jsonrpc.Message, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	type reply struct {
		msg *jsonrpc.Message
		err error
	}
	ch := make(chan reply, 1)
	if _, err := c.GoModern(ctx, method, json.RawMessage(params), nil, func(m *jsonrpc.Message, err error) { ch <- reply{m, err} }); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.msg, r.err
	case <-ctx.Done():
		t.Fatalf("%s sent with GoModern was not answered", method)
		return nil, nil
	}
}

// A remote server whose server/discover lists both 2026-07-28 and
// 2025-11-25 (the Go SDK over stateless HTTP) is a dual backend:
// initialized and used as a legacy one for 2025 sessions (Go), while a
// 2026-07-28 client's request (GoModern) goes to it in that era, with the
// era's headers and _meta, and is served in that era.
func TestEraDualRemoteBackend(t *testing.T) {
	srv := sdkServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	endpoint, log := recordingProxy(t, ts.URL+"/mcp")
	r := runRemote(t, remoteConfig(endpoint), "")
	st := r.await(t, "healthy", healthy)
	if st.Server.Era() != EraDual || st.Server.ProtocolVersion != ProtocolVersion || st.Server.Era().String() != "dual" {
		t.Fatalf("server = %+v (era %s); want dual, initialized with %s; log:\n%s", st.Server, st.Server.Era(), ProtocolVersion, strings.Join(r.logs.Messages(), "\n"))
	}
	conn := r.b.Conn()
	if !conn.Dual() || conn.Modern() {
		t.Fatalf("connection dual %v, modern %v; want a dual one", conn.Dual(), conn.Modern())
	}
	initialized := false
	for _, h := range log.all() {
		initialized = initialized || h.Get("Mcp-Method") == "initialize" || h.Get("Mcp-Protocol-Version") == ProtocolVersion
	}
	if !initialized {
		t.Error("the dual server was not initialized")
	}
	// A 2026-07-28 request: served in that era, where the SDK refuses to
	// send a request to the client.
	before := len(log.all())
	m, err := goModern(t, conn, "tools/call", `{"name":"sample","arguments":{}}`)
	if err != nil || !strings.Contains(string(m.Result)+string(m.Error), "2026-07-28") {
		t.Fatalf("modern sample = %+v, %v; want the SDK's refusal to sample in 2026-07-28", m, err)
	}
	m, err = goModern(t, conn, "tools/call", `{"name":"echo","arguments":{"text":"per request"}}`)
	if err != nil || m.Error != nil || !strings.Contains(string(m.Result), "per request") {
		t.Fatalf("modern echo = %+v, %v", m, err)
	}
	modern := 0
	for _, h := range log.all()[before:] {
		if h.Get("Content-Type") == "" {
			continue // a GET: the 2025 connection opens its event stream when it likes, also now
		}
		modern++
		if h.Get("Mcp-Session-Id") != "" || h.Get("Mcp-Protocol-Version") != ModernProtocolVersion || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") == "" {
			t.Errorf("a 2026-07-28 request went with headers %v; want no session, MCP-Protocol-Version %s, Mcp-Method and Mcp-Name", h, ModernProtocolVersion)
		}
	}
	if modern != 2 {
		t.Errorf("%d requests for the 2 modern calls", modern)
	}
	// Go, as for a 2025 session, goes in the initialized era.
	before = len(log.all())
	if res, err := r.call(t, "echo", `{"text":"session"}`); err != nil || !strings.Contains(string(res), "session") {
		t.Fatalf("session echo = %s, %v", res, err)
	}
	for _, h := range log.all()[before:] {
		if v := h.Get("Mcp-Protocol-Version"); v != ProtocolVersion {
			t.Errorf("a session's request went with MCP-Protocol-Version %q, want %s: %v", v, ProtocolVersion, h)
		}
	}
}

// Over stdio a connection has one era, which its first message picks (the
// Go SDK and the TypeScript SDK v2 alike): a server that answers the
// server/discover probe as a dual one is one process, which serves every
// client in 2026-07-28 (its era shows as dual), where the SDK refuses to
// send requests to the client. A restart replaces that one process.
func TestEraDualStdioBackend(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := runRemote(t, stdioConfig([]string{exe, "-test.run=^$"}, map[string]string{sdkStdioEnv: "1"}), "")
	st := r.await(t, "healthy", healthy)
	conn := r.b.Conn()
	if st.Server.Era() != EraDual || st.Server.ProtocolVersion != ModernProtocolVersion || !conn.Modern() || conn.Dual() || st.PID != conn.PID() {
		t.Fatalf("server = %+v (era %s), connection modern %v dual %v; want one modern connection to a dual server", st.Server, st.Server.Era(), conn.Modern(), conn.Dual())
	}
	res, err := r.call(t, "echo", `{"text":"x"}`)
	if err != nil || !strings.Contains(string(res), `"resultType"`) {
		t.Fatalf("echo = %s, %v; want a 2026-07-28 result", res, err)
	}
	res, err = r.call(t, "sample", `{}`)
	if err != nil || !strings.Contains(string(res), "cannot be sent while serving a request on protocol version 2026-07-28") {
		t.Fatalf("sample = %s, %v; want the SDK's refusal to sample in 2026-07-28", res, err)
	}
	for _, n := range r.h.notes.All() {
		if n == "sampling/createMessage" {
			t.Errorf("the server sent %s in 2026-07-28", n)
		}
	}

	// A restart replaces the one process.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := r.b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.Done():
	default:
		t.Errorf("process %d still runs after a restart", conn.PID())
	}
	if c := r.b.Conn(); c == nil || c == conn || !c.Modern() || r.b.Status().PID != c.PID() {
		t.Errorf("after a restart: connection %p (old %p); want a new modern one", c, conn)
	}
}

// era = "legacy" spares a server the server/discover probe: a dual server
// is then initialized and used as a 2025 one, over stdio too, so that its
// tools that ask their client the 2025 way (here the Go SDK's
// ServerSession.CreateMessage) work.
func TestEraLegacyInitializesADualServer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := stdioConfig([]string{exe, "-test.run=^$"}, map[string]string{sdkStdioEnv: "1"})
	cfg.Era = config.EraLegacy
	r := runRemote(t, cfg, "")
	st := r.await(t, "healthy", healthy)
	if st.Server.Era() != EraLegacy || st.Server.ProtocolVersion != ProtocolVersion || r.b.Conn().Modern() {
		t.Fatalf("server = %+v (era %s); want a legacy one, initialized with %s", st.Server, st.Server.Era(), ProtocolVersion)
	}
	res, err := r.call(t, "sample", `{}`)
	if err != nil || !strings.Contains(string(res), "sampled") {
		t.Fatalf("sample = %s, %v; want the sampled answer", res, err)
	}
	awaitItem(t, &r.h.notes, "sampling/createMessage", is("sampling/createMessage"))
	for _, m := range r.logs.Messages() {
		if strings.Contains(m, "server/discover") {
			t.Errorf("logged %q: the backend was probed", m)
		}
	}
}
