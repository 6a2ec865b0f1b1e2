// Package itest drives the real mcpgated binary with real clients and real
// (or fake, where a behaviour must be provoked) MCP servers behind it.
package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// gateway starts mcpgated with the given backends section; FAKE in it is
// replaced by the fake server's path.
func gateway(t *testing.T, backends string) *testutil.Daemon {
	t.Helper()
	return gatewayWith(t, "", backends)
}

// gatewayWith is gateway with extra keys for the [gateway] section.
func gatewayWith(t *testing.T, gatewayKeys, backends string) *testutil.Daemon {
	t.Helper()
	bins := testutil.Build(t)
	toml, url := testutil.Config(t, strings.ReplaceAll(backends, "FAKE", bins.Fake))
	toml = strings.Replace(toml, "[gateway]\n", "[gateway]\n"+gatewayKeys+"\n", 1)
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
}

// structured decodes a tool result's structuredContent into v.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("structuredContent %s: %v", raw, err)
	}
}

func TestToolsOfTwoBackendsUnderTheirPrefixes(t *testing.T) {
	d := gateway(t, `
[backends.alpha]
command = "FAKE"
args = ["--tools", "only_alpha"]

[backends.beta]
command = "FAKE"
tool_prefix = ""
args = ["--tools", "only_beta"]
`)
	cs := d.Connect(t, nil)
	if got := cs.InitializeResult().ServerInfo.Name; got != "mcpgate" {
		t.Errorf("serverInfo.name = %q, want mcpgate", got)
	}
	names := testutil.ToolNames(t, cs)
	for _, want := range []string{"alpha__echo", "alpha__only_alpha", "echo", "only_beta"} {
		if !names[want] {
			t.Errorf("tool %q missing from %v", want, names)
		}
	}
	if names["alpha__only_beta"] || names["only_alpha"] {
		t.Errorf("a tool is exposed under the wrong prefix: %v", names)
	}
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "alpha__echo", map[string]any{"text": "via alpha"})); got != "via alpha" {
		t.Errorf("alpha__echo = %q", got)
	}
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "only_beta", nil)); got != "only_beta ok" {
		t.Errorf("only_beta = %q", got)
	}
	// Each backend saw its own tool name, unprefixed.
	var echoed struct{ Arguments map[string]any }
	structured(t, testutil.MustCallTool(t, cs, "alpha__echo", map[string]any{"text": "x"}), &echoed)
	if echoed.Arguments["text"] != "x" {
		t.Errorf("arguments reached the backend as %v", echoed.Arguments)
	}
}

func TestUnknownToolSuggestsClosestNames(t *testing.T) {
	d := gateway(t, "[backends.gh]\ncommand = \"FAKE\"\n")
	cs := d.Connect(t, nil)
	_, err := testutil.CallTool(t, cs, "echo", nil)
	if err == nil || !strings.Contains(err.Error(), `unknown tool "echo"`) || !strings.Contains(err.Error(), `"gh__echo"`) {
		t.Fatalf("calling an unknown tool: %v; want the unknown tool named and gh__echo suggested", err)
	}
}

func TestCollisionLaterBackendLosesTheTool(t *testing.T) {
	dir := t.TempDir()
	d := gateway(t, fmt.Sprintf(`
[backends.a]
command = "FAKE"
tool_prefix = ""
args = ["--record", %q]

[backends.b]
command = "FAKE"
tool_prefix = ""
args = ["--record", %q, "--tools", "only_b"]
`, dir+"/a", dir+"/b"))
	cs := d.Connect(t, nil)
	testutil.MustCallTool(t, cs, "echo", map[string]any{"text": "who"})
	a, _ := os.ReadFile(dir + "/a")
	b, _ := os.ReadFile(dir + "/b")
	if !strings.Contains(string(a), `"name":"echo"`) || strings.Contains(string(b), `"name":"echo"`) {
		t.Errorf("echo went to the wrong backend:\na: %s\nb: %s", a, b)
	}
	if !testutil.ToolNames(t, cs)["only_b"] {
		t.Error("b lost its tools that do not collide")
	}
	awaitLog(t, d, `tool \"echo\" of backend \"b\" is hidden`)
}

// Many clients' concurrent calls share one child; replies come back out of
// order and each reaches the client that asked.
func TestConcurrentCallsComeBackOutOfOrderToTheirCallers(t *testing.T) {
	d := gateway(t, "[backends.s]\ncommand = \"FAKE\"\n")
	const clients, perClient = 4, 8
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	for c := range clients {
		cs := d.Connect(t, nil)
		for i := range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf("client %d call %d", c, i)
				// Later calls are faster, so they overtake earlier ones.
				res, err := testutil.CallTool(t, cs, "s__slow", map[string]any{"ms": 10 * (perClient - i), "text": want})
				if err != nil {
					errs <- err
					return
				}
				var got struct{ Text string }
				structured(t, res, &got)
				if got.Text != want {
					errs <- fmt.Errorf("got %q, want %q", got.Text, want)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A client's id comes back byte for byte, whatever its JSON spelling, while
// the child only ever sees the gateway's own ids.
func TestClientIDsRestoredByteExact(t *testing.T) {
	d := gateway(t, "[backends.s]\ncommand = \"FAKE\"\n")
	h := newRawClient(t, d.URL)
	for _, id := range []string{`"caf\u00e9"`, `9007199254740993`, `-42`, `"a\"b\\c"`, `1.0`, `"😀"`} {
		body := h.post(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"s__echo","arguments":{"text":"x"}}}`)
		if !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":`+id+`,"result":`) {
			t.Errorf("id %s came back as %s", id, body)
		}
		var res struct {
			Result struct{ StructuredContent struct{ RawID string } }
		}
		json.Unmarshal([]byte(body), &res)
		if raw := res.Result.StructuredContent.RawID; raw == id || strings.ContainsAny(raw, `"-.`) {
			t.Errorf("the child saw id %s for client id %s; want the gateway's own integer", raw, id)
		}
	}
}

func TestCrashFailsPendingCallsAtOnceThenRestarts(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	d := gateway(t, fmt.Sprintf(`
[backends.c]
command = "FAKE"
args = ["--record", %q]
restart_backoff_initial = "20ms"
`, rec))
	changed := make(chan struct{}, 16)
	cs := d.Connect(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	before := testutil.FakeProcess(t, cs, "c__pid")

	pending := make(chan error, 1)
	go func() {
		_, err := testutil.CallTool(t, cs, "c__slow", map[string]any{"ms": 600000})
		pending <- err
	}()
	// The slow call must be in flight at the child before it crashes.
	awaitFile(t, rec, `"name":"slow"`)
	testutil.CallTool(t, cs, "c__crash", map[string]any{"code": 3})
	select {
	case err := <-pending:
		if err == nil || !strings.Contains(err.Error(), "exited with status 3") {
			t.Errorf("pending call ended with %v; want an error saying the backend exited with status 3", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call pending on the crashed child was not answered")
	}
	// The tools stay listed through the restart (catalog_grace), a call
	// waits for the new child (start_wait), and nothing changed, so no
	// list_changed goes out.
	var after testutil.Process
	structured(t, testutil.MustCallTool(t, cs, "c__pid", nil), &after)
	if after.PID == before.PID {
		t.Errorf("pid %d answered after the crash; want a new child", after.PID)
	}
	select {
	case <-changed:
		t.Error("tools/list_changed for a restart that changed no tool")
	default:
	}
	exitReport := `(pid ` + fmt.Sprint(before.PID) + `) exited with status 3`
	awaitLog(t, d, exitReport)
	if n := strings.Count(d.Stderr.String(), exitReport); n != 1 {
		t.Errorf("%d exit reports for pid %d in the log, want exactly one:\n%s", n, before.PID, d.Stderr.String())
	}
}

func TestMaxRestartsThenFailed(t *testing.T) {
	d := gateway(t, `
[backends.bad]
command = "FAKE"
args = ["--exit-at-start", "7", "--stderr-at-start", "cannot open database"]
max_restarts = 2
restart_backoff_initial = "10ms"
restart_backoff_max = "20ms"

[backends.good]
command = "FAKE"
`)
	// Ready need not wait for bad's restarts (TestMissingCommandDoesNotDelayReady
	// shows it does not); whatever bad is doing by then, the status says.
	ready := d.Notify.Messages()[d.Notify.Await(t, 0, time.Second, "READY=1", testutil.Has("READY=1"))]
	// good's tools, whatever their number: what the fake server offers grows.
	status := regexp.MustCompile(`(?m)^STATUS=1/2 backends healthy, [0-9]+ tools; bad (.*)$`)
	if !status.MatchString(ready) {
		t.Errorf("READY=1 came with %q; want the status saying what bad is doing", ready)
	}
	d.AwaitNotify(t, 0, 30*time.Second, "STATUS= saying bad failed", func(msg string) bool {
		m := status.FindStringSubmatch(msg)
		return m != nil && m[1] == "failed"
	})
	cs := d.Connect(t, nil)
	names := testutil.ToolNames(t, cs)
	if names["bad__echo"] || !names["good__echo"] {
		t.Errorf("tools = %v; want good's and none of bad's", names)
	}
	awaitLog(t, d, "gave up after 2 restarts")
	awaitLog(t, d, "exited with status 7")
	if got := strings.Count(d.Stderr.String(), `spawned backend \"bad\" (pid `); got != 3 {
		t.Errorf("bad was spawned %d times; want 3 (the start and max_restarts=2 restarts)", got)
	}
}

func TestTimeoutAnswersClientAndCancelsAtChild(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	d := gateway(t, fmt.Sprintf(`
[backends.t]
command = "FAKE"
args = ["--record", %q]
timeout = "300ms"
`, rec))
	cs := d.Connect(t, nil)
	_, err := testutil.CallTool(t, cs, "t__slow", map[string]any{"ms": 60000})
	if err == nil || !strings.Contains(err.Error(), `backend "t" did not answer tools/call within 300ms`) {
		t.Fatalf("slow call: %v; want a timeout error naming the backend and the timeout", err)
	}
	awaitFile(t, rec, `"method":"notifications/cancelled"`)
	// The child still answers pings, so it stays and serves.
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "t__echo", map[string]any{"text": "still here"})); got != "still here" {
		t.Errorf("echo after the timeout = %q", got)
	}
}

func TestHungChildIsKilledAndRestarted(t *testing.T) {
	d := gateway(t, `
[backends.h]
command = "FAKE"
timeout = "300ms"
restart_backoff_initial = "10ms"
`)
	cs := d.Connect(t, nil)
	before := testutil.FakeProcess(t, cs, "h__pid")
	if _, err := testutil.CallTool(t, cs, "h__hang", nil); err == nil || !strings.Contains(err.Error(), "within 300ms") {
		t.Fatalf("hang: %v; want a timeout", err)
	}
	awaitNewChild(t, cs, "h__pid", before.PID)
	awaitLog(t, d, "did not answer ping after a call timed out")
}

func TestGarbageAndOversizedOutputIsDropped(t *testing.T) {
	d := gateway(t, `
[backends.g]
command = "FAKE"
`)
	cs := d.Connect(t, nil)
	// 20 MiB exceeds the default max_message_bytes of 16 MiB.
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "g__garbage", map[string]any{"bytes": 20 << 20})); !strings.Contains(got, "garbage") {
		t.Errorf("garbage answered %q", got)
	}
	for _, want := range []string{"dropped invalid output of the child", "dropped a message from the child", "dropped a response with an unknown id"} {
		awaitLog(t, d, want)
	}
	_, err := testutil.CallTool(t, cs, "g__huge", map[string]any{"bytes": 17 << 20})
	if err == nil || !strings.Contains(err.Error(), "message too large") || !strings.Contains(err.Error(), "max_message_bytes") {
		t.Errorf("huge response: %v; want a message-too-large error", err)
	}
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "g__echo", map[string]any{"text": "ok"})); got != "ok" {
		t.Errorf("echo afterwards = %q", got)
	}
}

func TestChattyStderrNeverBlocksTheChild(t *testing.T) {
	d := gateway(t, "[backends.n]\ncommand = \"FAKE\"\n")
	cs := d.Connect(t, nil)
	testutil.MustCallTool(t, cs, "n__stderr_spam", map[string]any{"lines": 100000, "prefix": "noise"})
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "n__echo", map[string]any{"text": "after"})); got != "after" {
		t.Errorf("echo after the spam = %q", got)
	}
}

func TestChildProcessSetup(t *testing.T) {
	work := t.TempDir()
	d := gateway(t, fmt.Sprintf(`
[backends.e]
command = "FAKE"
cwd = %q
env = { MCPGATE_TEST_SECRET = "s3cret" }
`, work))
	cs := d.Connect(t, nil)
	p := testutil.FakeProcess(t, cs, "e__pid")
	if p.PGID != p.PID {
		t.Errorf("child pgid %d != pid %d: not in its own process group", p.PGID, p.PID)
	}
	if p.PPID != d.PID {
		t.Errorf("child's parent is %d, want the daemon %d", p.PPID, d.PID)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(environ), "\x00")
	has := func(prefix string) bool {
		for _, kv := range env {
			if strings.HasPrefix(kv, prefix) {
				return true
			}
		}
		return false
	}
	if !has("MCPGATE_TEST_SECRET=s3cret") {
		t.Error("config env not passed to the child")
	}
	for _, name := range []string{"NOTIFY_SOCKET=", "LISTEN_FDS=", "WATCHDOG_USEC=", "JOURNAL_STREAM="} {
		if has(name) {
			t.Errorf("the child got the daemon's %s", name)
		}
	}
	if !has("PATH=") {
		t.Error("the child did not inherit the environment")
	}
	if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.PID)); cwd != work {
		t.Errorf("child cwd = %q, want %q", cwd, work)
	}
}

// Shutdown closes stdin, then SIGTERMs and SIGKILLs whole process groups:
// nothing survives, not a child that ignores SIGTERM and EOF, not a
// grandchild, not a double-forked one.
func TestShutdownLeavesNoProcess(t *testing.T) {
	d := gatewayWith(t, `shutdown_grace_period = "200ms"`, `
[backends.stubborn]
command = "FAKE"
args = ["--ignore-sigterm", "--ignore-eof"]

[backends.parent]
command = "FAKE"
`)
	cs := d.Connect(t, nil)
	stubborn := testutil.FakeProcess(t, cs, "stubborn__pid")
	parent := testutil.FakeProcess(t, cs, "parent__pid")
	var grand, orphan struct{ PID, PGID int }
	structured(t, testutil.MustCallTool(t, cs, "parent__spawn_grandchild", map[string]any{"ignore_sigterm": true}), &grand)
	structured(t, testutil.MustCallTool(t, cs, "parent__spawn_grandchild", map[string]any{"double_fork": true}), &orphan)
	if grand.PGID != parent.PID || orphan.PGID != parent.PID {
		t.Fatalf("grandchildren not in the child's group: %+v %+v (group %d)", grand, orphan, parent.PID)
	}

	d.Signal(syscall.SIGTERM)
	select {
	case <-d.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not exit after SIGTERM")
	}
	if code := d.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	for _, pg := range []int{stubborn.PID, parent.PID} {
		if testutil.GroupAlive(pg) {
			t.Errorf("process group %d survived the shutdown", pg)
		}
	}
	for _, pid := range []int{grand.PID, orphan.PID} {
		if st := testutil.State(pid); st != "" {
			t.Errorf("grandchild %d survived (state %s)", pid, st)
		}
	}
	awaitLog(t, d, `signal=SIGTERM`)
	awaitLog(t, d, `signal=SIGKILL`)
}

func TestCheckConfig(t *testing.T) {
	bins := testutil.Build(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("[backends.x]\ncommand = \"/bin/true\"\n"), 0o644)
	out, err := exec.Command(bins.Daemon, "--check-config", "--config", good).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Errorf("valid config: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[gateway]\nrequest_timeout = \"soon\"\n\n[backends.x]\ncommand = \"/bin/true\"\ntimeot = \"5s\"\n"), 0o644)
	out, err = exec.Command(bins.Daemon, "--check-config", "--config", bad).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("invalid config: exit %v, want 1", err)
	}
	for _, want := range []string{"bad.toml:2", "gateway.request_timeout", "bad.toml:6", "backends.x.timeot", `"timeout"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--check-config output lacks %q:\n%s", want, out)
		}
	}
	// The daemon refuses to start on it, with the same messages.
	out, err = exec.Command(bins.Daemon, "--config", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "backends.x.timeot") {
		t.Errorf("daemon started on an invalid config: %v\n%s", err, out)
	}
}

// At least one real, published MCP server runs behind the gateway.
func TestRealNpmServerBehindTheGateway(t *testing.T) {
	bin := testutil.NpmServer(t, "mcp-server-everything")
	d := gateway(t, fmt.Sprintf(`
[backends.everything]
command = %q
args = ["stdio"]

[backends.fake]
command = "FAKE"
`, bin))
	cs := d.Connect(t, nil)
	names := testutil.ToolNames(t, cs)
	if !names["everything__echo"] || !names["fake__echo"] {
		t.Fatalf("tools = %v; want everything__echo and fake__echo", names)
	}
	res := testutil.MustCallTool(t, cs, "everything__echo", map[string]any{"message": "hello from mcpgate"})
	if !strings.Contains(testutil.ToolText(res), "hello from mcpgate") {
		t.Errorf("everything__echo = %q", testutil.ToolText(res))
	}
}

// awaitNewChild waits until the fake server's pid tool answers from a
// child other than old.
func awaitNewChild(t *testing.T, cs *mcp.ClientSession, tool string, old int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "a new child", func() bool {
		res, err := testutil.CallTool(t, cs, tool, nil)
		if err != nil || res.IsError {
			return false
		}
		var p testutil.Process
		structured(t, res, &p)
		return p.PID != old
	})
}

// awaitLog waits until the daemon's output contains want; it reaches the
// test through a pipe, a little after the daemon wrote it.
func awaitLog(t *testing.T, d *testutil.Daemon, want string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("the log to contain %s", want), func() bool {
		return strings.Contains(d.Stderr.String(), want)
	})
}

// awaitFile waits until the file at path contains want: a fake server's
// --record file shows what reached the child.
func awaitFile(t *testing.T, path, want string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s to contain %s", path, want), func() bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), want)
	})
}

// A daemon told to stop while a backend waits out its restart backoff
// spawns nothing more.
func TestShutdownDuringBackoffSpawnsNothing(t *testing.T) {
	bins := testutil.Build(t)
	toml, url := testutil.Config(t, fmt.Sprintf(`
[backends.flaky]
command = %q
args = ["--exit-at-start", "1"]
restart_backoff_initial = "1h"
restart_backoff_max = "1h"
`, bins.Fake))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{NoWait: true})
	awaitLog(t, d, "restarting backend")
	d.Signal(syscall.SIGINT)
	select {
	case <-d.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not exit on SIGINT during a backoff wait")
	}
	if code := d.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if n := strings.Count(d.Stderr.String(), `msg="spawned backend \"`); n != 1 {
		t.Errorf("the backend was spawned %d times, want once (nothing after the stop):\n%s", n, d.Stderr.String())
	}
}
