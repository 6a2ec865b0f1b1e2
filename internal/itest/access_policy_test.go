package itest

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestAccessPolicyHidesABackend: what narrow may not use does not exist
// for it: lists, calls, completions and list_changed.
func TestAccessPolicyHidesABackend(t *testing.T) {
	d, _ := accessGateway(t)
	full := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), nil)
	narrowEvents := testutil.NewClientEvents("narrow")
	narrow := testutil.ConnectHTTP(t, d.URL, tokenClient(narrowToken), narrowEvents.ClientOptions())
	ctx := testutil.Context(t, 60*time.Second)

	fullTools, narrowTools := testutil.ToolNames(t, full), testutil.ToolNames(t, narrow)
	if !fullTools["b__beta"] || !narrowTools["a__alpha"] || narrowTools["b__beta"] || narrowTools["b__echo"] {
		t.Errorf("tools: full sees %v, narrow sees %v; want b's tools hidden from narrow only", fullTools, narrowTools)
	}
	_, hidden := testutil.CallTool(t, narrow, "b__echo", map[string]any{"text": "x"})
	_, unknown := testutil.CallTool(t, narrow, "zz__nothing", map[string]any{"text": "x"})
	if hidden == nil || !strings.Contains(hidden.Error(), `unknown tool "b__echo"`) || strings.Contains(hidden.Error(), "did you mean \"b__") {
		t.Errorf("narrow calling b__echo: %v, want the unknown-tool error and no suggestion of b's tools", hidden)
	}
	if unknown == nil || !strings.Contains(unknown.Error(), `unknown tool "zz__nothing"`) {
		t.Errorf("narrow calling an unknown tool: %v", unknown)
	}

	prompts, err := narrow.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "a__greet" {
		t.Errorf("narrow's prompts = %+v, %v; want only a__greet", prompts, err)
	}
	complete := func(cs *mcp.ClientSession, prompt string) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: prompt},
			Argument: mcp.CompleteParamsArgument{Name: "name", Value: "a"}})
		return err
	}
	if err := complete(narrow, "a__greet"); err != nil {
		t.Errorf("narrow completing a__greet: %v", err)
	}
	if err := complete(full, "b__greet"); err != nil {
		t.Errorf("full completing b__greet: %v", err)
	}
	if err := complete(narrow, "b__greet"); err == nil || !strings.Contains(err.Error(), `unknown prompt "b__greet"`) {
		t.Errorf("narrow completing b__greet: %v, want unknown prompt", err)
	}
	res, err := narrow.ListResources(ctx, nil)
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "fake://r/0" {
		t.Errorf("narrow's resources = %+v, %v; want only fake://r/0", res, err)
	}
	if _, err := narrow.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fake://r/1"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("narrow reading fake://r/1: %v, want resource not found", err)
	}

	// list_changed follows the filtered view. b's tools change first; then
	// a resource narrow subscribed to is touched, a marker on the same
	// stream: narrow must see the marker without a tools/list_changed
	// before it. Then a's tools change, which narrow must hear about.
	if err := narrow.Subscribe(ctx, &mcp.SubscribeParams{URI: "fake://r/0"}); err != nil {
		t.Fatal(err)
	}
	fullEvents := testutil.NewClientEvents("full")
	full2 := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), fullEvents.ClientOptions())
	testutil.MustCallTool(t, full2, "b__set_tools", map[string]any{"names": []string{"gamma"}, "burst": 1})
	fullEvents.Await(t, 1, 30*time.Second, "tools/list_changed after b's tools changed", testutil.Method("notifications/tools/list_changed"))
	testutil.Eventually(t, 30*time.Second, "b__gamma in full's list", func() bool { return testutil.ToolNames(t, full2)["b__gamma"] })
	testutil.MustCallTool(t, full2, "a__touch", map[string]any{"uri": "fake://r/0"})
	narrowEvents.Await(t, 1, 30*time.Second, "the resources/updated marker", testutil.Method("notifications/resources/updated"))
	if n := narrowEvents.Count(testutil.Method("notifications/tools/list_changed")); n != 0 {
		t.Errorf("narrow got %d tools/list_changed for a change of b's tools, which it cannot see: %s", n, narrowEvents)
	}
	testutil.MustCallTool(t, full2, "a__set_tools", map[string]any{"names": []string{"delta"}, "burst": 1})
	narrowEvents.Await(t, 1, 30*time.Second, "tools/list_changed after a's tools changed", testutil.Method("notifications/tools/list_changed"))

	// Calls are audited with who called what, never the arguments.
	testutil.MustCallTool(t, narrow, "a__echo", map[string]any{"text": "audited-argument-text"})
	d.Stderr.Await(t, 10*time.Second, "the audit entry of narrow's call", func(out string) bool {
		return strings.Contains(out, "message_id=af84f9ba2bdf44638ea8e737adfb73ba") && strings.Contains(out, "client=narrow") &&
			strings.Contains(out, "tool=a__echo")
	})
	for _, line := range strings.Split(d.Stderr.String(), "\n") {
		if strings.Contains(line, "audit") && strings.Contains(line, "audited-argument-text") {
			t.Errorf("an audit entry holds the call's arguments: %s", line)
		}
	}
}

// TestAccessClientLimits: beyond max_sessions and rate_limit a client gets
// 429 with Retry-After.
func TestAccessClientLimits(t *testing.T) {
	d, _ := accessGateway(t)
	auth := []string{"Authorization", "Bearer " + cappedToken}
	first, _ := exchange(t, http.DefaultClient, d.URL, initializeBody, auth...)
	id := first.Header.Get("Mcp-Session-Id")
	if first.StatusCode != 200 || id == "" {
		t.Fatalf("first session: HTTP %d", first.StatusCode)
	}
	second, body := exchange(t, http.DefaultClient, d.URL, initializeBody, auth...)
	if second.StatusCode != 429 || second.Header.Get("Retry-After") == "" || !strings.Contains(body, "max_sessions") {
		t.Errorf("second session: HTTP %d Retry-After %q %s; want 429 naming max_sessions", second.StatusCode, second.Header.Get("Retry-After"), body)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	inSession := append(auth, "Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-06-18")
	if resp, body := exchange(t, http.DefaultClient, d.URL, ping, inSession...); resp.StatusCode != 200 {
		t.Errorf("third request: HTTP %d %s, want 200 within rate_limit 3/1h", resp.StatusCode, body)
	}
	resp, body := exchange(t, http.DefaultClient, d.URL, ping, inSession...)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "rate_limit") {
		t.Errorf("fourth request: HTTP %d Retry-After %q %s; want 429 naming rate_limit", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Other clients are not affected.
	if resp, body := exchange(t, http.DefaultClient, d.URL, initializeBody, "Authorization", "Bearer "+fullToken); resp.StatusCode != 200 {
		t.Errorf("another client: HTTP %d %s", resp.StatusCode, body)
	}
}

// TestAccessBridgeTokenFromEnvironment: mcpgatectl bridge sends the token
// in $MCPGATE_TOKEN over TCP.
func TestAccessBridgeTokenFromEnvironment(t *testing.T) {
	d, _ := accessGateway(t)
	bins := testutil.Build(t)
	for _, tc := range []struct {
		token, want string
	}{
		{fullToken, `"serverInfo"`},
		{"", "no bearer token"},
	} {
		cmd := exec.CommandContext(testutil.Context(t, 60*time.Second), bins.Ctl, "bridge", "--url", d.URL)
		cmd.Env = testutil.Env("MCPGATE_TOKEN=" + tc.token)
		cmd.Stdin = strings.NewReader(initializeBody + "\n")
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("bridge with MCPGATE_TOKEN=%q: %v %s; want %q", tc.token, err, out, tc.want)
		}
	}
}

// TestAccessReloadRemovesAClient: after a reload without a client, its
// sessions are gone and its token is refused; others keep theirs.
func TestAccessReloadRemovesAClient(t *testing.T) {
	d, _ := accessGateway(t)
	narrow := testutil.ConnectHTTP(t, d.URL, tokenClient(narrowToken), nil)
	full := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), nil)
	b, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "[clients.narrow]")
	end := strings.Index(text, "[clients.capped]")
	if err := os.WriteFile(d.ConfigPath, []byte(text[:start]+text[end:]), 0o644); err != nil {
		t.Fatal(err)
	}
	from := d.Notify.Mark(t)
	d.Signal(syscall.SIGHUP)
	d.AwaitNotify(t, from, 30*time.Second, "READY=1 after the reload", testutil.Has("READY=1"))
	if _, err := narrow.ListTools(testutil.Context(t, 30*time.Second), nil); err == nil {
		t.Error("the removed client's session still answers")
	}
	if resp, body := exchange(t, http.DefaultClient, d.URL, initializeBody, "Authorization", "Bearer "+narrowToken); resp.StatusCode != 401 {
		t.Errorf("the removed client's token: HTTP %d %s, want 401", resp.StatusCode, body)
	}
	if _, err := full.ListTools(testutil.Context(t, 30*time.Second), nil); err != nil {
		t.Errorf("another client's session after the reload: %v", err)
	}
}
