package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// clientWait bounds what TestClients2026 awaits.
const clientWait = 60 * time.Second

// TestClients2026 connects the official SDK clients that speak 2026-07-28,
// the Go SDK's (go.mod's go-sdk) and the TypeScript SDK v2's
// (packaging/npm/sdk-client-2026.mjs), to mcpgate in front of
// server-everything, a 2025-11-25 backend over stdio. Each must reach
// mcpgate in the 2026 era with no request answered 400 (the fallback round
// trip clients make to a 2025-only endpoint) and no initialize, counted by a
// reverse proxy in front of mcpgate; then list, call, get a prompt, read a
// resource, and answer a sampling and an elicitation request that
// server-everything sends in the middle of a call. Meanwhile another
// client's call on the same server-everything waits for a retry that never
// comes: it holds neither SDK client back.
//
// It runs only with MCPGATE_CONFORMANCE=1; `make conformance` sets it.
func TestClients2026(t *testing.T) {
	if os.Getenv("MCPGATE_CONFORMANCE") != "1" {
		t.Skip("2026 SDK clients through the gateway not requested: set MCPGATE_CONFORMANCE=1 (make conformance does)")
	}
	tk := installTools(t)
	everything, err := filepath.EvalSymlinks(testutil.NpmServer(t, "mcp-server-everything"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(testutil.CacheDir(), "npm", "sdk-client-2026.mjs")
	if _, err := os.Stat(script); err != nil {
		testutil.Unavailable(t, "the SDK v2 client driver is not installed (run packaging/ci/deps.sh, which make check runs): %v", err)
	}
	toml, gateway := testutil.Config(t, fmt.Sprintf(`[backends.everything]
command = %q
args = [%q, "stdio"]
tool_prefix = ""
`, tk.node, everything))
	testutil.StartDaemon(t, toml, gateway, testutil.DaemonOptions{})
	abandonInputRequired(t, gateway)

	t.Run("go sdk", func(t *testing.T) {
		front := newCountingProxy(t, gateway)
		ev := testutil.NewClientEvents("go")
		client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-go-sdk-client", Version: "1"}, ev.ClientOptions())
		ctx, cancel := context.WithTimeout(context.Background(), clientWait)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("connect: %v; requests at the front: %s", err, front)
		}
		defer cs.Close()
		if v := cs.InitializeResult().ProtocolVersion; v != spec2026 {
			t.Errorf("the Go SDK client connected at %q, want %s; requests at the front: %s", v, spec2026, front)
		}
		// server-everything adds its trigger tools once a client that can
		// answer them shook hands; the gateway's catalog follows.
		testutil.Eventually(t, clientWait, "the trigger tools in the catalog", func() bool {
			res, err := cs.ListTools(ctx, nil)
			return err == nil && hasTools(res.Tools, "echo", "trigger-sampling-request", "trigger-elicitation-request")
		})
		if got := goCallText(t, cs, "echo", map[string]any{"message": "hello"}); !strings.Contains(got, "hello") {
			t.Errorf("echo = %q", got)
		}
		prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: map[string]string{"city": "Paris"}})
		if err != nil || len(prompt.Messages) == 0 || !strings.Contains(fmt.Sprint(prompt.Messages[0].Content), "Paris") {
			t.Errorf("prompts/get args-prompt = %+v, %v", prompt, err)
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/static/document/features.md"})
		if err != nil || len(res.Contents) != 1 || res.Contents[0].Text == "" {
			t.Errorf("resources/read = %+v, %v", res, err)
		}
		if got := goCallText(t, cs, "trigger-sampling-request", map[string]any{"prompt": "prompt of go", "maxTokens": 10}); !strings.Contains(got, "from go") {
			t.Errorf("trigger-sampling-request = %q, want the client's answer", got)
		}
		if got := goCallText(t, cs, "trigger-elicitation-request", nil); !strings.Contains(got, `"go"`) {
			t.Errorf("trigger-elicitation-request = %q, want the client's answer", got)
		}
		// The handlers ran inside the calls, which have returned.
		if s, e := ev.Count(testutil.Method("sampling/createMessage")), ev.Count(testutil.Method("elicitation/create")); s != 1 || e != 1 {
			t.Errorf("the Go SDK client answered %d sampling and %d elicitation requests, want 1 and 1: %s", s, e, ev)
		}
		front.check(t)
	})

	t.Run("typescript sdk v2", func(t *testing.T) {
		front := newCountingProxy(t, gateway)
		plan := `{"call": {"name": "echo", "arguments": {"message": "hello"}},
			"prompt": {"name": "args-prompt", "arguments": {"city": "Paris"}},
			"resource": "demo://resource/static/document/features.md",
			"sampling": {"name": "trigger-sampling-request", "arguments": {"prompt": "prompt of v2", "maxTokens": 10}},
			"elicitation": {"name": "trigger-elicitation-request", "arguments": {}}}`
		dir := t.TempDir()
		var stdout bytes.Buffer
		cmd := exec.Command(tk.node, script, front.URL, plan)
		cmd.Stdout = &stdout
		p := startProc(t, "sdk-client-2026", cmd, filepath.Join(dir, "client.log"))
		if code := p.wait(t, 2*clientWait); code != 0 {
			t.Fatalf("the SDK v2 client exited %d:\n%s\nrequests at the front: %s", code, p.output(), front)
		}
		var out struct {
			ProtocolVersion string
			Tools           []string
			Call            *mcp.CallToolResult
			Prompt          *mcp.GetPromptResult
			Resource        *mcp.ReadResourceResult
			Sampling        *mcp.CallToolResult
			Elicitation     *mcp.CallToolResult
			Answered        []struct{ Method string }
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("the SDK v2 client's output: %v\n%s", err, stdout.String())
		}
		if out.ProtocolVersion != spec2026 {
			t.Errorf("the SDK v2 client connected at %q, want %s", out.ProtocolVersion, spec2026)
		}
		if !strings.Contains(testutil.ToolText(out.Call), "hello") {
			t.Errorf("echo = %+v", out.Call)
		}
		if len(out.Prompt.Messages) == 0 || !strings.Contains(fmt.Sprint(out.Prompt.Messages[0].Content), "Paris") {
			t.Errorf("prompts/get args-prompt = %+v", out.Prompt)
		}
		if len(out.Resource.Contents) != 1 || out.Resource.Contents[0].Text == "" {
			t.Errorf("resources/read = %+v", out.Resource)
		}
		if got := testutil.ToolText(out.Sampling); !strings.Contains(got, "from the SDK v2 client") {
			t.Errorf("trigger-sampling-request = %q, want the client's answer", got)
		}
		if got := testutil.ToolText(out.Elicitation); !strings.Contains(got, `"v2"`) {
			t.Errorf("trigger-elicitation-request = %q, want the client's answer", got)
		}
		var answered []string
		for _, a := range out.Answered {
			answered = append(answered, a.Method)
		}
		if strings.Join(answered, ",") != "sampling/createMessage,elicitation/create" {
			t.Errorf("the SDK v2 client answered %q, want one sampling then one elicitation request", answered)
		}
		front.check(t)
	})
}

// abandonInputRequired makes a stateless call to server-everything at
// the gateway's endpoint that asks for sampling, and never retries it: the
// backend's call waits for its client, which is gone.
func abandonInputRequired(t *testing.T, gateway string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}},"name":"trigger-sampling-request","arguments":{"prompt":"abandoned","maxTokens":5}}}`
	testutil.Eventually(t, clientWait, "an InputRequiredResult for the call that is abandoned", func() bool {
		req, err := http.NewRequest(http.MethodPost, gateway, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": spec2026, "Mcp-Method": "tools/call", "Mcp-Name": "trigger-sampling-request"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"resultType":"input_required"`) // server-everything's trigger tools may still be joining
	})
}

func hasTools(tools []*mcp.Tool, names ...string) bool {
	have := map[string]bool{}
	for _, tool := range tools {
		have[tool.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

func goCallText(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientWait)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Errorf("%s answered with an error: %s", name, testutil.ToolText(res))
	}
	return testutil.ToolText(res)
}

// countingProxy is a reverse proxy in front of mcpgate that records every
// HTTP request: its verb, JSON-RPC method and the status it got.
type countingProxy struct {
	URL string

	mu       sync.Mutex
	requests []frontRequest
}

type frontRequest struct {
	Verb, Method string
	Status       int
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1 // event streams pass at once
	rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		r := resp.Request.Context().Value(frontKey{}).(*frontRequest)
		r.Status = resp.StatusCode
		p.requests = append(p.requests, *r)
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		json.Unmarshal(body, &msg)
		fr := &frontRequest{Verb: req.Method, Method: msg.Method}
		rp.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), frontKey{}, fr)))
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + u.Path
	return p
}

type frontKey struct{}

// check fails the test if any request at the front got 400 or was an
// initialize: a 2026 client has no reason for either.
func (p *countingProxy) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.requests {
		if r.Status == http.StatusBadRequest || r.Method == "initialize" {
			t.Errorf("a 2026 client's %s %s got %d at the front; all requests: %s", r.Verb, r.Method, r.Status, p.stringLocked())
		}
	}
	t.Logf("%d requests at the front: %s", len(p.requests), p.stringLocked())
}

func (p *countingProxy) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stringLocked()
}

func (p *countingProxy) stringLocked() string {
	var parts []string
	for _, r := range p.requests {
		parts = append(parts, fmt.Sprintf("%s %s → %d", r.Verb, r.Method, r.Status))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
