package itest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// gatewayOnBus starts mcpgated with the backends (FAKE is the fake server)
// and composites on a private session bus, and returns a D-Bus client on
// that bus and the bus address.
func gatewayOnBus(t *testing.T, config string) (*testutil.Daemon, *dbusapi.Client, string) {
	t.Helper()
	bins := testutil.Build(t)
	bus := dbustest.Start(t, dbustest.Options{})
	toml, url := testutil.ConfigWith(t, strings.ReplaceAll(config, "FAKE", bins.Fake), testutil.ConfigOptions{Bus: "session"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: []string{"DBUS_SESSION_BUS_ADDRESS=" + bus.Address}})
	conn, err := dbus.Connect(bus.Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return d, dbusapi.NewClient(conn), bus.Address
}

// outputMeta returns the result's _meta["io.mcpgate/output"], or nil.
func outputMeta(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, _ := res.Meta["io.mcpgate/output"].(map[string]any)
	return m
}

func TestOutputPipelineAndItsCounts(t *testing.T) {
	d, client, busAddr := gatewayOnBus(t, `
[backends.alpha]
command = "FAKE"
max_output_bytes = "1KiB"

[backends.alpha.tool_overrides.echo]
max_output_bytes = "off"
`)
	cs := d.Connect(t, nil)
	huge := testutil.MustCallTool(t, cs, "alpha__huge", map[string]any{"bytes": 100000})
	text := testutil.ToolText(huge)
	if len(text) > 1100 || !strings.Contains(text, "bytes omitted by mcpgate") {
		t.Errorf("huge result is %d bytes, want it cut to 1 KiB with a marker", len(text))
	}
	meta := outputMeta(t, huge)
	if meta == nil || meta["truncated"] != true || meta["originalBytes"].(float64) < 100000 {
		t.Errorf("_meta io.mcpgate/output = %v", meta)
	}
	long := strings.Repeat("é", 2000)
	echo := testutil.MustCallTool(t, cs, "alpha__echo", map[string]any{"text": long})
	if testutil.ToolText(echo) != long || outputMeta(t, echo) != nil {
		t.Error("the override did not turn truncation off for echo")
	}
	var sc struct{ Text string }
	structured(t, echo, &sc)
	if sc.Text != long {
		t.Error("structuredContent was changed")
	}

	b, err := client.Backend(testutil.Context(t, 10*time.Second), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if b.NBytesProcessed < 100000+4000 || b.NBytesReturned >= b.NBytesProcessed || b.NBytesReturned < 4000 {
		t.Errorf("NBytesProcessed %d, NBytesReturned %d", b.NBytesProcessed, b.NBytesReturned)
	}
	tools := map[string]dbusapi.ToolOutputBytes{}
	for _, tb := range b.ToolOutputBytes {
		tools[tb.Tool] = tb
	}
	if e := tools["echo"]; e.Processed == 0 || e.Processed != e.Returned {
		t.Errorf("ToolOutputBytes echo = %+v, want equal non-zero counts", e)
	}
	if h := tools["huge"]; h.Processed < 100000 || h.Returned > 2000 {
		t.Errorf("ToolOutputBytes huge = %+v", h)
	}
	cmd := exec.Command(testutil.Build(t).Ctl, "--user", "status", "alpha")
	cmd.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS="+busAddr)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "% saved)") || !strings.Contains(string(out), "huge: ") {
		t.Errorf("mcpgatectl status alpha shows no saving:\n%s", out)
	}

	// A reload changes the pipeline without restarting the backend.
	pid := alphaPID(t, cs)
	reconfigure(t, d, "[backends.alpha]\ncommand = \"FAKE\"\nmax_output_bytes = \"4KiB\"\n")
	testutil.Eventually(t, 10*time.Second, "the reloaded max_output_bytes", func() bool {
		res, err := testutil.CallTool(t, cs, "alpha__huge", map[string]any{"bytes": 100000})
		return err == nil && len(testutil.ToolText(res)) > 4000 && len(testutil.ToolText(res)) < 4200
	})
	if alphaPID(t, cs) != pid {
		t.Error("a change of max_output_bytes restarted the backend")
	}
}

func TestCLIBackend(t *testing.T) {
	dir := t.TempDir()
	adapter := filepath.Join(dir, "adapter.toml")
	if err := os.WriteFile(adapter, []byte(`
[tools.argv]
description = "prints its arguments"
command = ["sh", "-c", "for a in \"$@\"; do printf '%s|' \"$a\"; done", "sh", "{{a}}", "{{b}}"]
input_schema = { type = "object", required = ["a"], properties = { a = { type = "string" }, b = { type = "string" } } }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _, _ := gatewayOnBus(t, `
[backends.sh]
transport = "cli"
adapter_file = "`+adapter+`"

[backends.sh.tools.fail]
command = ["sh", "-c", "echo broken >&2; exit 4"]

[backends.sh.tools.json]
command = ["echo", "{\"title\": \"from cli\"}"]
output = "json"

[backends.sh.tools.sleeper]
command = ["sh", "-c", "echo $$ > $0; exec sleep 1000", "`+filepath.Join(dir, "sleeper.pid")+`"]
`)
	cs := d.Connect(t, nil)
	names := testutil.ToolNames(t, cs)
	for _, n := range []string{"sh__argv", "sh__fail", "sh__json"} {
		if !names[n] {
			t.Errorf("%s missing from %v", n, names)
		}
	}
	evil := "; rm -rf / $(id) `id` \"q\" 'q'\n-x"
	got := testutil.ToolText(testutil.MustCallTool(t, cs, "sh__argv", map[string]any{"a": evil, "b": "--b"}))
	if got != evil+"|--b|" {
		t.Errorf("argv = %q", got)
	}
	_, err := testutil.CallTool(t, cs, "sh__argv", map[string]any{"b": "x"})
	if err == nil || !strings.Contains(err.Error(), `missing required argument "a"`) {
		t.Errorf("call without a: %v, want -32602 naming a", err)
	}
	fail := callResult(t, cs, "sh__fail", nil)
	if !fail.IsError || !strings.Contains(testutil.ToolText(fail), "exited with status 4") || !strings.Contains(testutil.ToolText(fail), "broken") {
		t.Errorf("failing tool: %+v", testutil.ToolText(fail))
	}
	var sc struct{ Title string }
	structured(t, testutil.MustCallTool(t, cs, "sh__json", nil), &sc)
	if sc.Title != "from cli" {
		t.Errorf("json tool structuredContent = %+v", sc)
	}

	// A call the client cancels (notifications/cancelled) kills its program.
	ctx, cancel := context.WithCancel(testutil.Context(t, 30*time.Second))
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sh__sleeper"})
		called <- err
	}()
	var pid int
	testutil.Eventually(t, 10*time.Second, "the sleeper's pid file", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "sleeper.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) })
	cancel()
	<-called
	testutil.Eventually(t, 10*time.Second, "the cancelled program to be killed and reaped", func() bool {
		return errors.Is(unix.Kill(pid, 0), unix.ESRCH)
	})
}

// TestCLICallLimits: a cli backend's max_concurrent_calls and
// queue_timeout apply to each invocation of its programs.
func TestCLICallLimits(t *testing.T) {
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	d := gateway(t, `
[backends.sh]
transport = "cli"
max_concurrent_calls = 1
queue_timeout = "200ms"

[backends.sh.tools.hold]
command = ["sh", "-c", "touch \"$0\"; while [ ! -e \"$1\" ]; do sleep 0.05; done; echo held", "`+started+`", "`+release+`"]

[backends.sh.tools.quick]
command = ["echo", "quick"]
`)
	cs := d.Connect(t, nil)
	held := make(chan string, 1)
	go func() {
		res, err := testutil.CallTool(t, cs, "sh__hold", nil)
		if err != nil {
			held <- err.Error()
			return
		}
		held <- strings.TrimSpace(testutil.ToolText(res))
	}()
	testutil.Eventually(t, 10*time.Second, "the first program to run", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	_, err := testutil.CallTool(t, cs, "sh__quick", nil)
	if err == nil || !strings.Contains(err.Error(), "max_concurrent_calls") {
		t.Errorf("a second call while the only slot is taken: %v, want the queue_timeout error naming max_concurrent_calls", err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := <-held; got != "held" {
		t.Errorf("the first call = %q, want held", got)
	}
	if got := strings.TrimSpace(testutil.ToolText(testutil.MustCallTool(t, cs, "sh__quick", nil))); got != "quick" {
		t.Errorf("a call once the slot is free = %q", got)
	}
}

func TestComposites(t *testing.T) {
	config := `
[backends.alpha]
command = "FAKE"

[composites.chain]
description = "echo twice"
input_schema = { type = "object", required = ["text"], properties = { text = { type = "string" } } }
steps = [
  { tool = "alpha__echo", arguments = { text = "first {{input.text}}" } },
  { tool = "alpha__echo", arguments = { text = "second {{steps.0.structuredContent.text}}" } },
]

[composites.broken]
steps = [
  { tool = "alpha__echo", arguments = { text = "one" } },
  { tool = "alpha__error", arguments = { message = "middle failed" } },
  { tool = "alpha__echo", arguments = { text = "never" } },
]

[composites.hidden]
steps = [{ tool = "alpha__nosuch" }]

[composites.loop]
steps = [{ tool = "composite__loop" }]
`
	d, _, _ := gatewayOnBus(t, config)
	events := testutil.NewClientEvents("client")
	cs := d.Connect(t, events.ClientOptions())
	res := testutil.MustCallTool(t, cs, "composite__chain", map[string]any{"text": "hi"})
	if got := testutil.ToolText(res); got != "second first hi" {
		t.Errorf("chain = %q, want %q", got, "second first hi")
	}

	ctx := testutil.Context(t, 20*time.Second)
	progress, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "composite__chain", Arguments: map[string]any{"text": "p"}, Meta: mcp.Meta{"progressToken": "tok"}})
	if err != nil || progress.IsError {
		t.Fatalf("chain with progress: %v %v", err, progress)
	}
	events.Await(t, 2, 10*time.Second, "a progress notification per step", testutil.Method("notifications/progress"))

	broken := callResult(t, cs, "composite__broken", nil)
	if text := testutil.ToolText(broken); !broken.IsError || !strings.Contains(text, "step 1 (alpha__error) failed") || !strings.Contains(text, "middle failed") {
		t.Errorf("broken = %q, want an error naming step 1", text)
	}
	hidden := callResult(t, cs, "composite__hidden", nil)
	if text := testutil.ToolText(hidden); !hidden.IsError || !strings.Contains(text, `unknown tool "alpha__nosuch"`) {
		t.Errorf("a step whose tool the caller cannot see = %q, want the unknown tool error", text)
	}
	loop := callResult(t, cs, "composite__loop", nil)
	if text := testutil.ToolText(loop); !loop.IsError || !strings.Contains(text, "at most 4 deep") {
		t.Errorf("a composite calling itself = %q, want the depth error", text)
	}
	if _, err := testutil.CallTool(t, cs, "composite__chain", map[string]any{}); err == nil || !strings.Contains(err.Error(), `missing required argument "text"`) {
		t.Errorf("chain without text: %v", err)
	}

	// Hot reload: a changed composite applies without a restart.
	pid := alphaPID(t, cs)
	reconfigure(t, d, strings.Replace(config, `text = "second {{steps.0.structuredContent.text}}"`, `text = "changed {{steps.0.text}}"`, 1))
	testutil.Eventually(t, 10*time.Second, "the changed composite", func() bool {
		res, err := testutil.CallTool(t, cs, "composite__chain", map[string]any{"text": "hi"})
		return err == nil && testutil.ToolText(res) == "changed first hi"
	})
	if alphaPID(t, cs) != pid {
		t.Error("a composite change restarted the backend")
	}
}

// reconfigure replaces the backends and composites of the running daemon's
// configuration (FAKE is the fake server) and sends SIGHUP.
func reconfigure(t *testing.T, d *testutil.Daemon, config string) {
	t.Helper()
	running, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(running), "[backends.")
	config = strings.ReplaceAll(config, "FAKE", testutil.Build(t).Fake)
	if err := os.WriteFile(d.ConfigPath, []byte(head+strings.TrimLeft(config, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
}

func alphaPID(t *testing.T, cs *mcp.ClientSession) float64 {
	t.Helper()
	var p struct{ PID float64 }
	structured(t, testutil.MustCallTool(t, cs, "alpha__pid", nil), &p)
	return p.PID
}

// callResult calls a tool that may answer with an error result.
func callResult(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := testutil.CallTool(t, cs, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func TestCLIProgramEndsWithTheGateway(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "sleeper.pid")
	d := gatewayWith(t, `drain_timeout = "200ms"`, `
[backends.sh]
transport = "cli"
tools.sleeper = { command = ["sh", "-c", "echo $$ > $0; exec sleep 1000", "`+pidFile+`"] }
`)
	cs := d.Connect(t, nil)
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "sh__sleeper"})
		called <- err
	}()
	var pid int
	testutil.Eventually(t, 10*time.Second, "the sleeper's pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) })
	d.Terminate(t)
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("the cli program %d outlived the gateway (kill 0: %v)", pid, err)
	}
	<-called // answered or failed: the gateway is gone
}
