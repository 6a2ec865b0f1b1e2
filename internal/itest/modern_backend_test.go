package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/testing/modernserver"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// connect2025 opens a session of protocol 2025-11-25 with the official Go
// SDK client, whatever newer version it knows, and closes it when the test
// ends.
func connect2025(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-test-2025", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("the session speaks %s, want 2025-11-25", v)
	}
	return cs
}

// Backends that speak MCP 2026-07-28 (the TypeScript SDK v2 fixture over
// stdio and over HTTP) are modern on D-Bus beside a legacy one, and serve
// a 2025 session: their input_required results become an elicitation and
// a sampling request on the session, and the calls complete with the
// answers and the echoed requestState.
func TestModernBackendsServeA2025Session(t *testing.T) {
	remote, seen := headerProxy(t, modernserver.HTTP(t))
	d, bus, _ := gatewayOnBus(t, fmt.Sprintf(`%s
[backends.r]
url = %q

[backends.fake]
command = "FAKE"
`, modernStdioBackend(t, "m"), remote))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, want := range map[string][2]string{"m": {"modern", "2026-07-28"}, "r": {"modern", "2026-07-28"}, "fake": {"legacy", "2025-11-25"}} {
		st, err := bus.Backend(ctx, name)
		if err != nil || st.Era != want[0] || st.ProtocolVersion != want[1] {
			t.Errorf("backend %s: era %q, protocol %q (%v); want %s %s", name, st.Era, st.ProtocolVersion, err, want[0], want[1])
		}
	}

	var mu sync.Mutex
	var asked []string
	cs := connect2025(t, d.URL, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, "elicit: "+req.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			mu.Lock()
			asked = append(asked, "sample: "+req.Params.Messages[0].Content.(*mcp.TextContent).Text)
			mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}}, nil
		},
	})
	for _, b := range []string{"m", "r"} {
		res := testutil.MustCallTool(t, cs, b+"__echo", map[string]any{"text": "hello"})
		if got := testutil.ToolText(res); got != "echo: hello" {
			t.Errorf("%s__echo = %q", b, got)
		}
		res = testutil.MustCallTool(t, cs, b+"__confirm", map[string]any{"action": "deploy"})
		if got := testutil.ToolText(res); got != `confirmed deploy: {"ok":true} state round-1:deploy` {
			t.Errorf("%s__confirm = %q; want it confirmed with the client's answer and the echoed requestState", b, got)
		}
		res = testutil.MustCallTool(t, cs, b+"__ask", map[string]any{"question": "Capital of France?"})
		if got := testutil.ToolText(res); got != "the model said: Paris" {
			t.Errorf("%s__ask = %q; want the client's sampled answer", b, got)
		}
	}
	// The remote one got the 2026 headers, its own tool names in Mcp-Name
	// (the gateway's prefix stripped), and no session.
	names := map[string]bool{}
	for _, h := range seen.all() {
		if h.Get("Mcp-Session-Id") != "" || h.Get("Mcp-Protocol-Version") != "2026-07-28" {
			t.Errorf("a request to r had headers %v; want MCP-Protocol-Version 2026-07-28 and no session", h)
		}
		if h.Get("Mcp-Method") == "tools/call" {
			names[h.Get("Mcp-Name")] = true
		}
	}
	if !names["echo"] || !names["confirm"] || !names["ask"] || len(names) != 3 {
		t.Errorf("Mcp-Name of r's tools/call: %v; want echo, confirm and ask", names)
	}
	mu.Lock()
	want := "[elicit: Really deploy? sample: Capital of France? elicit: Really deploy? sample: Capital of France?]"
	if got := fmt.Sprint(asked); got != want {
		t.Errorf("the client was asked %s; want %s", got, want)
	}
	mu.Unlock()

	// A client that declared no elicitation is never asked: the call fails
	// with an error that names what is missing.
	plain := connect2025(t, d.URL, nil)
	res, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "m__confirm", Arguments: map[string]any{"action": "deploy"}})
	if err == nil && !res.IsError {
		t.Fatalf("m__confirm without elicitation = %q; want an error", testutil.ToolText(res))
	}
	msg := fmt.Sprint(err)
	if err == nil {
		msg = testutil.ToolText(res)
	}
	if !strings.Contains(msg, "elicitation") {
		t.Errorf("m__confirm without elicitation failed with %q; want it to name elicitation", msg)
	}
}

// A 2026-07-28 client gets a modern backend's input_required result as the
// backend sent it, requestState and all, and its retry with the answers
// reaches the backend, which completes the call.
func TestModernBackendInputRequiredReachesA2026Client(t *testing.T) {
	d := gateway(t, modernStdioBackend(t, "m"))
	const caps = `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `},"name":"m__confirm","arguments":{"action":"deploy"}}}`
	resp, answer := exchange(t, http.DefaultClient, d.URL, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "m__confirm")
	result, errMsg := statelessResult(t, answer)
	if resp.StatusCode != 200 || errMsg != "" || result["resultType"] != "input_required" || result["requestState"] != "round-1:deploy" {
		t.Fatalf("first round: HTTP %d %s; want the backend's input_required result", resp.StatusCode, answer)
	}
	reqs, _ := result["inputRequests"].(map[string]any)
	if confirm, _ := reqs["confirm"].(map[string]any); confirm["method"] != "elicitation/create" {
		t.Fatalf("inputRequests = %v; want the backend's elicitation", reqs)
	}
	retry := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `},"name":"m__confirm","arguments":{"action":"deploy"},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"round-1:deploy"}}`
	resp, answer = exchange(t, http.DefaultClient, d.URL, retry, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "m__confirm")
	result, errMsg = statelessResult(t, answer)
	content, _ := result["content"].([]any)
	if resp.StatusCode != 200 || errMsg != "" || len(content) != 1 || content[0].(map[string]any)["text"] != `confirmed deploy: {"ok":true} state round-1:deploy` {
		t.Fatalf("retry: HTTP %d %s; want the call confirmed", resp.StatusCode, answer)
	}
}

// A 2025 session sees no input_required result from a modern backend: the
// gateway sends the elicitation it asks for as a request on the call's
// stream, takes the session's answer, and completes the call with it. (The
// Go SDK client would also cope with the raw result on its own, so this
// test reads the wire.)
func TestModernBackendInputRequiredBecomesSessionRequests(t *testing.T) {
	d := gateway(t, modernStdioBackend(t, "m"))
	resp, body := exchange(t, http.DefaultClient, d.URL, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: HTTP %d %s", resp.StatusCode, body)
	}
	exchange(t, http.DefaultClient, d.URL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25")

	req, err := http.NewRequestWithContext(testutil.Context(t, 30*time.Second), http.MethodPost, d.URL,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"m__confirm","arguments":{"action":"deploy"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	call, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer call.Body.Close()
	events := mcphttp.NewEventReader(call.Body, 1<<20)
	next := func() map[string]any {
		t.Helper()
		data, err := events.Message()
		if err != nil {
			t.Fatalf("the call's stream: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		return m
	}
	ask := next()
	params, _ := ask["params"].(map[string]any)
	if ask["method"] != "elicitation/create" || ask["id"] == nil || params["message"] != "Really deploy?" {
		t.Fatalf("first message on the call's stream: %v; want the backend's elicitation as a request", ask)
	}
	id, _ := json.Marshal(ask["id"])
	exchange(t, http.DefaultClient, d.URL, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"action":"accept","content":{"ok":true}}}`, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25")
	final := next()
	result, _ := final["result"].(map[string]any)
	content, _ := result["content"].([]any)
	if fmt.Sprint(final["id"]) != "1" || len(content) != 1 || content[0].(map[string]any)["text"] != `confirmed deploy: {"ok":true} state round-1:deploy` {
		t.Fatalf("the call's answer: %v; want it confirmed with the session's answer", final)
	}
}

// A modern backend that keeps asking gets MaxInputRounds (8) answers from
// a 2025 session and then the call fails; each retry is a new request
// that carries the answers and the echoed requestState. The log level the
// session set goes with each request, never as logging/setLevel.
func TestModernBackendInputRoundsAreBounded(t *testing.T) {
	dir := t.TempDir()
	record, all := filepath.Join(dir, "calls"), filepath.Join(dir, "all")
	script := `while read -r l; do
printf '%s\n' "$l" >> ` + all + `
id=${l#*'"id":'}; id=${id%%,*}
case "$l" in
*'"method":"server/discover"'*) echo '{"jsonrpc":"2.0","id":'$id',"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"logging":{}},"resultType":"complete"}}';;
*'"method":"tools/list"'*) echo '{"jsonrpc":"2.0","id":'$id',"result":{"tools":[{"name":"nag","inputSchema":{"type":"object"}}],"resultType":"complete"}}';;
*'"method":"tools/call"'*) printf '%s\n' "$l" >> ` + record + `
echo '{"jsonrpc":"2.0","id":'$id',"result":{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"again?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"s1"}}';;
esac
done`
	d := gateway(t, fmt.Sprintf("[backends.n]\ncommand = \"sh\"\nargs = [\"-c\", %q]\n", script))
	var asked atomic.Int32
	cs := connect2025(t, d.URL, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	if err := cs.SetLoggingLevel(testutil.Context(t, 30*time.Second), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "n__nag", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Fatalf("n__nag = %q; want an error after %d rounds", testutil.ToolText(res), 8)
	}
	if msg := fmt.Sprint(err); err != nil && !strings.Contains(msg, "more than 8 times") {
		t.Errorf("n__nag failed with %v; want it to say the backend asked more than 8 times", err)
	}
	if n := asked.Load(); n != 8 {
		t.Errorf("the client was asked %d times, want 8", n)
	}
	data, _ := os.ReadFile(record)
	calls := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(calls) != 9 {
		t.Fatalf("the backend got %d tools/call requests, want 9 (the call and 8 retries): %q", len(calls), calls)
	}
	ids := map[string]bool{}
	for i, c := range calls {
		var m struct {
			ID     json.RawMessage
			Params map[string]json.RawMessage
		}
		if err := json.Unmarshal([]byte(c), &m); err != nil {
			t.Fatal(err)
		}
		ids[string(m.ID)] = true
		if !strings.Contains(c, `"io.modelcontextprotocol/logLevel":"debug"`) {
			t.Errorf("call %d = %s; want the session's log level in _meta", i, c)
		}
		if i > 0 && (string(m.Params["requestState"]) != `"s1"` || string(m.Params["inputResponses"]) != `{"q":{"action":"accept"}}`) {
			t.Errorf("retry %d = %s; want the answers and requestState s1", i, c)
		}
	}
	if len(ids) != 9 {
		t.Errorf("the backend's requests used %d ids, want 9 different ones", len(ids))
	}
	if data, _ := os.ReadFile(all); strings.Contains(string(data), "logging/setLevel") {
		t.Errorf("the backend got logging/setLevel, which 2026-07-28 has not:\n%s", data)
	}
}

// headerLog records the headers of the requests a proxy passed on.
type headerLog struct {
	mu   sync.Mutex
	reqs []http.Header
}

func (l *headerLog) all() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.reqs...)
}

// headerProxy passes every request to the MCP endpoint target and records
// its headers; it returns its own endpoint.
func headerProxy(t *testing.T, target string) (string, *headerLog) {
	t.Helper()
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
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + u.Path, log
}

// A 2025 session's resources/subscribe reaches a modern backend as a
// resourceSubscriptions of its subscriptions/listen stream, and the
// updates announced there reach the session.
func TestModernBackendResourceSubscription(t *testing.T) {
	d := gateway(t, modernStdioBackend(t, "m"))
	updated := make(chan string, 4)
	cs := connect2025(t, d.URL, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	ctx := testutil.Context(t, 30*time.Second)
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "note://one"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	testutil.MustCallTool(t, cs, "m__touch", nil)
	select {
	case uri := <-updated:
		if uri != "note://one" {
			t.Errorf("updated %q, want note://one", uri)
		}
	case <-ctx.Done():
		t.Fatal("no notifications/resources/updated reached the session")
	}
}

// modernStdioBackend is the configuration of a backend named name that
// runs modernserver's stdio server, which speaks 2026-07-28 only.
func modernStdioBackend(t testing.TB, name string) string {
	argv, env := modernserver.Stdio(t)
	return fmt.Sprintf("\n[backends.%s]\ncommand = %q\nargs = [%q, %q]\nenv = { NODE_PATH = %q }\n", name, argv[0], argv[1], argv[2], env["NODE_PATH"])
}
