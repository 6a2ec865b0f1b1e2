package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// annotatedTools are tools of backend c with and without annotations, for
// a profile that selects by them.
const annotatedTools = `[
 {"name":"look","description":"Looks at something.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
 {"name":"wipe","description":"Wipes something out.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":true}},
 {"name":"plain","description":"States no annotations.","inputSchema":{"type":"object"}},
 {"name":"twice","description":"States readOnlyHint twice.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"readOnlyHint":true}}
]`

// profileGateway runs mcpgated with backends a, b and c (annotated tools),
// the clients full, narrow (whose policy hides a__echo) and ci (profile
// "ro" by default), and the profiles ro (a and c, not a__alpha, read-only
// tools), find (search mode) and findro (ro's selection in search mode).
func profileGateway(t *testing.T, extra string) *testutil.Daemon {
	t.Helper()
	bins := testutil.Build(t)
	tools := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(tools, []byte(annotatedTools), 0o644); err != nil {
		t.Fatal(err)
	}
	backends := fmt.Sprintf(`
[backends.a]
command = %[1]q
args = ["--tools", "alpha", "--prompts", "--resources", "2"]

[backends.b]
command = %[1]q
args = ["--tools", "beta", "--prompts"]

[backends.c]
command = %[1]q
args = ["--tools-file", %[5]q]

[clients.full]
token_sha256 = %[2]q

[clients.narrow]
token_sha256 = %[3]q
tools = ["*", "!a__echo"]

[clients.ci]
token_sha256 = %[4]q
profile = "ro"

[clients.seeker]
token_sha256 = %[7]q
search = true

[profiles.ro]
backends = ["a", "c"]
tools = ["*", "!a__alpha"]
prompts = ["!*"]

[profiles.reader]
backends = ["c"]
annotations = { readOnlyHint = true }

[profiles.find]
search = true
max_added_tools = 2
%[6]s
`, bins.Fake, sha256Hex(fullToken), sha256Hex(narrowToken), sha256Hex(ciToken), tools, extra, sha256Hex(seekerToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
}

const (
	ciToken     = "mcpgate_itest_ci_0123456789"
	seekerToken = "mcpgate_itest_seeker_0123456789"
)

// names returns the tool names of a listing.
func names(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for n := range testutil.ToolNames(t, cs) {
		out = append(out, n)
	}
	return sortedCopy(out)
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestProfileBesidePolicy: at a profile's path a client sees the
// intersection of the profile and its policy, in tools, prompts and
// resources; a call outside it gets the error of an unknown name, and the
// refusal names the profile; a client's default profile applies at the
// endpoint itself; a session answers only at the path it started at; an
// unknown profile's path is 404 naming the profiles; annotations select.
func TestProfileBesidePolicy(t *testing.T) {
	d := profileGateway(t, "")
	ro := strings.TrimSuffix(d.URL, "/mcp") + "/mcp/ro"
	full := testutil.ConnectHTTP(t, ro, tokenClient(fullToken), nil)
	narrow := testutil.ConnectHTTP(t, ro, tokenClient(narrowToken), nil)

	fullNames, narrowNames := testutil.ToolNames(t, full), testutil.ToolNames(t, narrow)
	for _, n := range []string{"a__echo", "c__look", "c__plain"} {
		if !fullNames[n] {
			t.Errorf("full at /mcp/ro lacks %s: %v", n, names(t, full))
		}
	}
	for _, n := range []string{"a__alpha", "b__echo", "b__beta"} {
		if fullNames[n] || narrowNames[n] {
			t.Errorf("a client at /mcp/ro sees %s, which the profile leaves out", n)
		}
	}
	if narrowNames["a__echo"] || !narrowNames["c__look"] {
		t.Errorf("narrow at /mcp/ro = %v; want the profile without a__echo, which its policy hides", names(t, narrow))
	}
	if _, err := testutil.CallTool(t, narrow, "a__echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), `unknown tool "a__echo"`) {
		t.Errorf("narrow calling a__echo at /mcp/ro: %v; want the unknown-tool error of its policy", err)
	}
	if _, err := testutil.CallTool(t, full, "b__echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), `unknown tool "b__echo"`) {
		t.Errorf("full calling b__echo at /mcp/ro: %v; want the unknown-tool error", err)
	}
	d.Stderr.Await(t, 10*time.Second, "the refusal naming the profile", func(out string) bool {
		return strings.Contains(out, `refused client \"full\": tools/call b__echo: profile \"ro\" does not select it`)
	})
	if res := testutil.MustCallTool(t, full, "a__echo", map[string]any{"text": "through ro"}); !strings.Contains(testutil.ToolText(res), "through ro") {
		t.Errorf("a__echo at /mcp/ro = %q", testutil.ToolText(res))
	}
	ctx := testutil.Context(t, 30*time.Second)
	if prompts, err := full.ListPrompts(ctx, nil); err != nil || len(prompts.Prompts) != 0 {
		t.Errorf("prompts at /mcp/ro = %+v, %v; the profile shows none", prompts, err)
	}
	if _, err := full.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a__greet", Arguments: map[string]string{"name": "x"}}); err == nil || !strings.Contains(err.Error(), "unknown prompt") {
		t.Errorf("getting a__greet at /mcp/ro: %v; want unknown prompt", err)
	}
	if res, err := full.ListResources(ctx, nil); err != nil || len(res.Resources) != 2 {
		t.Errorf("resources at /mcp/ro = %+v, %v; want a's two", res, err)
	}

	// At the endpoint itself full sees everything, and ci its default profile.
	if n := testutil.ToolNames(t, testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), nil)); !n["b__echo"] || !n["a__alpha"] {
		t.Errorf("full at /mcp = %v; want the whole catalog", n)
	}
	ci := testutil.ToolNames(t, testutil.ConnectHTTP(t, d.URL, tokenClient(ciToken), nil))
	if ci["b__echo"] || ci["a__alpha"] || !ci["a__echo"] {
		t.Errorf("ci at /mcp = %v; want its default profile ro", ci)
	}

	// Annotations select; a hint stated twice is no hint.
	reader := testutil.ToolNames(t, testutil.ConnectHTTP(t, strings.TrimSuffix(d.URL, "/mcp")+"/mcp/reader", tokenClient(fullToken), nil))
	if !reader["c__look"] || reader["c__wipe"] || reader["c__plain"] || reader["c__twice"] || len(reader) != 1 {
		t.Errorf("reader = %v; want only c__look, the one read-only tool", reader)
	}

	// A session started at /mcp/ro does not exist at /mcp; an unknown
	// profile's path says which there are.
	raw := &rawClient{url: ro}
	resp, body := raw.do(t, "POST", initializeBody, map[string]string{"Authorization": "Bearer " + fullToken})
	raw.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || raw.session == "" {
		t.Fatalf("initialize at /mcp/ro: %s %s", resp.Status, body)
	}
	other := &rawClient{url: d.URL, session: raw.session}
	if resp, body := other.do(t, "POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Authorization": "Bearer " + fullToken}); resp.StatusCode != 404 {
		t.Errorf("the session of /mcp/ro used at /mcp: %s %s; want 404", resp.Status, body)
	}
	nowhere := &rawClient{url: d.URL + "/nosuch"}
	if resp, body := nowhere.do(t, "POST", initializeBody, map[string]string{"Authorization": "Bearer " + fullToken}); resp.StatusCode != 404 ||
		!strings.Contains(body, `no profile "nosuch" is configured`) || !strings.Contains(body, "/mcp/{find,reader,ro}") {
		t.Errorf("an unknown profile's path: %s %s", resp.Status, body)
	}
}

// TestProfileListChangedFollowsTheProfile: a client at a profile's path
// hears of changes to the tools it sees, not of others'.
func TestProfileListChangedFollowsTheProfile(t *testing.T) {
	d := profileGateway(t, "")
	events := testutil.NewClientEvents("ro")
	testutil.ConnectHTTP(t, strings.TrimSuffix(d.URL, "/mcp")+"/mcp/ro", tokenClient(fullToken), events.ClientOptions())
	fullEvents := testutil.NewClientEvents("full")
	full := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), fullEvents.ClientOptions())

	testutil.MustCallTool(t, full, "b__set_tools", map[string]any{"names": []string{"gamma"}})
	testutil.Eventually(t, 30*time.Second, "b__gamma in full's list", func() bool { return testutil.ToolNames(t, full)["b__gamma"] })
	testutil.MustCallTool(t, full, "a__set_tools", map[string]any{"names": []string{"delta"}})
	events.Await(t, 1, 30*time.Second, "tools/list_changed after a's tools changed", testutil.Method("notifications/tools/list_changed"))
	if n := events.Count(testutil.Method("notifications/tools/list_changed")); n != 1 {
		t.Errorf("the client at /mcp/ro got %d tools/list_changed; want 1, for a's change only: %s", n, events)
	}
}

// TestProfileThroughTheBridge: mcpgatectl bridge --profile talks to the
// profile's path.
func TestProfileThroughTheBridge(t *testing.T) {
	d := profileGateway(t, "")
	bins := testutil.Build(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(fullToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testutil.Context(t, 60*time.Second), bins.Ctl, "bridge", "--url", d.URL, "--profile", "reader", "--token-file", tokenFile)
	cs := testutil.ConnectCommand(t, cmd, nil)
	if got := testutil.ToolNames(t, cs); len(got) != 1 || !got["c__look"] {
		t.Errorf("tools through bridge --profile reader = %v; want only c__look", got)
	}
	if res := testutil.MustCallTool(t, cs, "c__look", nil); !strings.Contains(testutil.ToolText(res), "look ok") {
		t.Errorf("c__look through the bridge = %q", testutil.ToolText(res))
	}
}

// TestProfileReload: a reload applies a changed profile to the sessions
// of its path, with list_changed, and ends those of a profile it removed;
// a client with search = true gets the meta-tools at the endpoint itself.
func TestProfileReload(t *testing.T) {
	d := profileGateway(t, "")
	base := strings.TrimSuffix(d.URL, "/mcp")
	events := testutil.NewClientEvents("ro")
	ro := testutil.ConnectHTTP(t, base+"/mcp/ro", tokenClient(fullToken), events.ClientOptions())
	if testutil.ToolNames(t, ro)["a__alpha"] {
		t.Fatal("a__alpha at /mcp/ro before the reload")
	}
	reader := &rawClient{url: base + "/mcp/reader"}
	resp, body := reader.do(t, "POST", initializeBody, map[string]string{"Authorization": "Bearer " + fullToken})
	if reader.session = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != 200 || reader.session == "" {
		t.Fatalf("initialize at /mcp/reader: %s %s", resp.Status, body)
	}
	seeker := names(t, testutil.ConnectHTTP(t, d.URL, tokenClient(seekerToken), nil))
	if fmt.Sprint(seeker) != "[add_tools call_tool find_tools]" {
		t.Errorf("a client with search = true at /mcp lists %v; want the meta-tools", seeker)
	}

	config, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(string(config), `tools = ["*", "!a__alpha"]`, `tools = ["*"]`, 1)
	next = strings.Replace(next, "[profiles.reader]\nbackends = [\"c\"]\nannotations = { readOnlyHint = true }\n", "", 1)
	if next == string(config) || strings.Contains(next, "profiles.reader") {
		t.Fatal("the test did not change the configuration")
	}
	if err := os.WriteFile(d.ConfigPath, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
	events.Await(t, 1, 30*time.Second, "tools/list_changed after ro changed", testutil.Method("notifications/tools/list_changed"))
	if !testutil.ToolNames(t, ro)["a__alpha"] {
		t.Error("a__alpha not at /mcp/ro after the reload that selects it")
	}
	testutil.Eventually(t, 30*time.Second, "the session of /mcp/reader ended", func() bool {
		resp, _ := reader.do(t, "POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Authorization": "Bearer " + fullToken})
		return resp.StatusCode == 404
	})
	d.Stderr.Await(t, 10*time.Second, "why the session ended, and the reload's summary", func(out string) bool {
		return strings.Contains(out, `profile \"reader\" was removed from the configuration`) && strings.Contains(out, "profiles removed reader; profiles changed ro")
	})
}

// TestEndpointPathIsAsSent: the endpoint and profile paths are matched on
// the path as sent, not on what percent-decoding it makes: a proxy in
// front routes and checks the bytes it sees. Before, /%6dcp was /mcp and
// /mcp/%66ind the profile find.
func TestEndpointPathIsAsSent(t *testing.T) {
	d := profileGateway(t, "")
	base := strings.TrimSuffix(d.URL, "/mcp")
	for path, want := range map[string]int{"/mcp": 200, "/mcp/find": 200, "/%6dcp": 404, "/mcp/%66ind": 404, "/%2fmcp": 404} {
		resp, body := exchange(t, tokenClient(fullToken), base+path, initializeBody)
		if resp.StatusCode != want {
			t.Errorf("initialize at %s: %s %s; want %d", path, resp.Status, body, want)
		}
	}
}
