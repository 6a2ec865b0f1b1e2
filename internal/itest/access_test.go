package itest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Tokens of the clients of accessGateway.
const (
	fullToken   = "mcpgate_itest_full_0123456789"
	narrowToken = "mcpgate_itest_narrow_0123456789"
	cappedToken = "mcpgate_itest_capped_0123456789"
	wrongToken  = "mcpgate_itest_wrong_0123456789"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// accessGateway runs mcpgated with auth = "required" on TCP and a unix
// socket, two fake backends a and b, and four clients: full (a token, no
// restriction), narrow (a token; sees only a's tools and prompts and one
// resource), capped (a token, one session, 3 requests an hour) and local
// (root on the unix socket).
func accessGateway(t *testing.T) (d *testutil.Daemon, socket string) {
	t.Helper()
	bins := testutil.Build(t)
	backends := fmt.Sprintf(`
[backends.a]
command = %[1]q
args = ["--tools", "alpha", "--prompts", "--resources", "2"]

[backends.b]
command = %[1]q
args = ["--tools", "beta", "--prompts"]

[clients.full]
token_sha256 = %[2]q

[clients.narrow]
token_sha256 = %[3]q
tools = ["*", "!b__*"]
prompts = ["a__*"]
resources = ["fake://r/0"]

[clients.capped]
token_sha256 = %[4]q
max_sessions = 1
rate_limit = "3/1h"

[clients.local]
unix_users = ["root"]
`, bins.Fake, sha256Hex(fullToken), sha256Hex(narrowToken), sha256Hex(cappedToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	dir := testutil.ShortTempDir(t)
	socket = filepath.Join(dir, "mcpgate.sock")
	toml = strings.Replace(toml, "listen = [", fmt.Sprintf("listen = [%q, ", "unix:"+socket), 1)
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{}), socket
}

// bearer is an http.RoundTripper that sends a bearer token.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func tokenClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token, http.DefaultTransport}}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"itest","version":"1"}}}`

// exchange POSTs body to url through hc with the given headers and returns
// the response with its body read.
func exchange(t *testing.T, hc *http.Client, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 30*time.Second), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAccessIdentities checks who is let in, over TCP and the unix socket,
// and that refusals say why, are journaled with the peer and never the
// token.
func TestAccessIdentities(t *testing.T) {
	d, socket := accessGateway(t)
	unix := testutil.UnixHTTPClient(socket)
	unixURL := "http://localhost/mcp"
	tests := []struct {
		name       string
		hc         *http.Client
		url        string
		token      string
		wantStatus int
		wantBody   string // in the answer
		wantBearer bool   // WWW-Authenticate: Bearer
	}{
		{"no token over TCP", http.DefaultClient, d.URL, "", 401, "no bearer token", true},
		{"wrong token over TCP", http.DefaultClient, d.URL, wrongToken, 401, "wrong bearer token", true},
		{"not a bearer token over TCP", http.DefaultClient, d.URL, "", 401, "not a bearer token", true},
		{"right token over TCP", http.DefaultClient, d.URL, fullToken, 200, `"serverInfo"`, false},
		{"right token over the unix socket", unix, unixURL, narrowToken, 200, `"serverInfo"`, false},
		{"wrong token over the unix socket, even from root", unix, unixURL, wrongToken, 401, "wrong bearer token", true},
		{"peer credentials of root over the unix socket", unix, unixURL, "", 200, `"serverInfo"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			switch {
			case tc.token != "":
				headers = []string{"Authorization", "Bearer " + tc.token}
			case strings.HasPrefix(tc.name, "not a bearer"):
				headers = []string{"Authorization", "Basic dXNlcjpwYXNz"}
			}
			resp, body := exchange(t, tc.hc, tc.url, initializeBody, headers...)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("HTTP %d %s, want %d with %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if got := resp.Header.Get("WWW-Authenticate"); tc.wantBearer != strings.HasPrefix(got, "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge: %v", got, tc.wantBearer)
			}
			if tc.wantStatus == 200 && resp.Header.Get("Mcp-Session-Id") == "" {
				t.Error("no Mcp-Session-Id")
			}
		})
	}
	d.Stderr.Await(t, 10*time.Second, "journaled refusals", func(out string) bool {
		return strings.Count(out, "refused a caller") >= 4
	})
	out := d.Stderr.String()
	for _, want := range []string{"message_id=e2c7994b55374c46a1e6b91578c0d764", "peer=127.0.0.1:", "peer=\"uid 0 pid ", "http_status=401"} {
		if !strings.Contains(out, want) {
			t.Errorf("the daemon's log has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, wrongToken) {
		t.Errorf("the daemon logged a token:\n%s", out)
	}
}

// TestAccessRefusedUID runs a client as a user no client lists, with
// setpriv, over the unix socket: it gets 403 with what to do.
func TestAccessRefusedUID(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "needs root to add a user and to change uid with setpriv")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testutil.Unavailable(t, "setpriv (util-linux) not installed: %v", err)
	}
	d, socket := accessGateway(t)
	name := fmt.Sprintf("mgtest%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		testutil.Unavailable(t, "useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	// Let the other user reach the socket: the refusal must come from the
	// gateway, not from the file mode.
	os.Chmod(filepath.Dir(socket), 0o755)
	os.Chmod(socket, 0o666)
	bins := testutil.Build(t)
	os.Chmod(bins.Dir, 0o755)
	os.Chmod(bins.Ctl, 0o755)

	cmd := exec.CommandContext(testutil.Context(t, 60*time.Second), setpriv, "--reuid="+u.Uid, "--regid="+u.Gid, "--clear-groups",
		bins.Ctl, "bridge", "--socket", socket)
	cmd.Stdin = strings.NewReader(initializeBody + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge as %s: %v\nstdout %s\nstderr %s", name, err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "matches no client") || !strings.Contains(stdout.String(), name) {
		t.Errorf("bridge as %s answered %s, want an error saying the user matches no client", name, stdout.String())
	}
	d.Stderr.Await(t, 10*time.Second, "a journaled 403", func(out string) bool {
		return strings.Contains(out, "http_status=403") && strings.Contains(out, "peer=\"uid "+u.Uid+" pid ")
	})

	// The same user with the token of a client gets in: a token is an
	// identity of its own.
	tokenFile := filepath.Join(testutil.ShortTempDir(t), "token")
	os.WriteFile(tokenFile, []byte(fullToken+"\n"), 0o644)
	os.Chmod(filepath.Dir(tokenFile), 0o755)
	cmd = exec.CommandContext(testutil.Context(t, 60*time.Second), setpriv, "--reuid="+u.Uid, "--regid="+u.Gid, "--clear-groups",
		bins.Ctl, "bridge", "--socket", socket, "--token-file", tokenFile)
	cmd.Stdin = strings.NewReader(initializeBody + "\n")
	stdout.Reset()
	cmd.Stdout = &stdout
	stderr.Reset()
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge --token-file as %s: %v\n%s", name, err, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"serverInfo"`) {
		t.Errorf("bridge --token-file answered %s, want the initialize result", stdout.String())
	}
}

// TestAccessSessionBelongsToItsIdentity: another identity presenting a
// session's id gets 404, as for a session that does not exist.
func TestAccessSessionBelongsToItsIdentity(t *testing.T) {
	d, socket := accessGateway(t)
	resp, _ := exchange(t, http.DefaultClient, d.URL, initializeBody, "Authorization", "Bearer "+fullToken)
	id := resp.Header.Get("Mcp-Session-Id")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	tests := []struct {
		name  string
		hc    *http.Client
		url   string
		token string
		want  int
	}{
		{"its own identity", http.DefaultClient, d.URL, fullToken, 200},
		{"another token", http.DefaultClient, d.URL, narrowToken, 404},
		{"peer credentials of another client", testutil.UnixHTTPClient(socket), "http://localhost/mcp", "", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			headers := []string{"Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-06-18"}
			if tc.token != "" {
				headers = append(headers, "Authorization", "Bearer "+tc.token)
			}
			resp, body := exchange(t, tc.hc, tc.url, list, headers...)
			if resp.StatusCode != tc.want {
				t.Errorf("HTTP %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want == 404 && !strings.Contains(body, "not found") {
				t.Errorf("body %s does not read like an unknown session's", body)
			}
		})
	}
}

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
