package itest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// onDemandBackend is started with a slow handshake, so that a gateway that
// waited for it would be visibly slower to be ready.
const (
	onDemandDelay   = 1500 * time.Millisecond
	onDemandBackend = `
[backends.lazy]
command = "FAKE"
args = ["--handshake-delay", "1500ms"]
start = "on-demand"
idle_stop = "1s"
`
)

// lifecycleGateway starts mcpgated with backends (FAKE replaced by the fake
// server) and STATE_DIRECTORY=state, as systemd's StateDirectory= sets it.
func lifecycleGateway(t *testing.T, state, backends string) *testutil.Daemon {
	t.Helper()
	return lifecycleGatewayWith(t, state, "", backends)
}

// lifecycleGatewayWith is lifecycleGateway with more [gateway] keys.
func lifecycleGatewayWith(t *testing.T, state, gatewayKeys, backends string) *testutil.Daemon {
	t.Helper()
	bins := testutil.Build(t)
	toml, url := testutil.ConfigWith(t, strings.ReplaceAll(backends, "FAKE", bins.Fake), testutil.ConfigOptions{Gateway: gatewayKeys})
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: []string{"STATE_DIRECTORY=" + state}})
}

// children returns the daemon's living descendants.
func children(d *testutil.Daemon) []int { return testutil.Descendants(d.PID) }

// counter reads the pid and the per-process call count from a fake
// server's pid tool result.
func counter(t *testing.T, res any) (pid, count int) {
	t.Helper()
	raw, _ := json.Marshal(res)
	var v struct{ PID, Count int }
	if err := json.Unmarshal(raw, &v); err != nil || v.PID == 0 {
		t.Fatalf("pid answered %s", raw)
	}
	return v.PID, v.Count
}

func TestOnDemandBackend(t *testing.T) {
	state := t.TempDir()
	cache := filepath.Join(state, "catalog", "lazy.json")

	// No cache yet: the backend starts once to fill it, and stops again.
	// Readiness does not wait for that.
	d := lifecycleGateway(t, state, onDemandBackend)
	testutil.Eventually(t, 30*time.Second, "the catalog cache to be written and the backend stopped", func() bool {
		_, err := os.Stat(cache)
		return err == nil && len(children(d)) == 0
	})
	d.Terminate(t)

	// A warm cache: ready without starting the backend, its tools listed.
	begin := time.Now()
	d = lifecycleGateway(t, state, onDemandBackend)
	ready := time.Since(begin)
	t.Logf("ready with a warm cache in %s; the backend's handshake alone takes %s", ready.Round(time.Millisecond), onDemandDelay)
	if kids := children(d); len(kids) > 0 {
		t.Errorf("an on-demand backend runs before any call: %v", kids)
	}
	status := strings.Join(d.Notify.Messages(), "\n")
	if !strings.Contains(status, "1 idle on demand") {
		t.Errorf("STATUS= does not count the idle on-demand backend:\n%s", status)
	}
	cs := d.Connect(t, nil)
	if names := testutil.ToolNames(t, cs); !names["lazy__pid"] {
		t.Fatalf("the cached catalog lacks lazy__pid: %v", names)
	}

	// The first call starts it and succeeds.
	pid1, n := counter(t, testutil.MustCallTool(t, cs, "lazy__pid", nil).StructuredContent)
	if n != 1 {
		t.Errorf("first call: count %d, want 1 from a fresh process", n)
	}
	// idle_stop stops it; the next call starts a new one.
	testutil.Eventually(t, 30*time.Second, "idle_stop to stop the backend", func() bool { return len(children(d)) == 0 })
	pid2, n := counter(t, testutil.MustCallTool(t, cs, "lazy__pid", nil).StructuredContent)
	if pid2 == pid1 || n != 1 {
		t.Errorf("after idle_stop: pid %d count %d, want a new process (not %d) with count 1", pid2, n, pid1)
	}
	d.Terminate(t)

	// A cache that lists less than the server has: the start announces the
	// difference with list_changed.
	staleCache(t, cache, "pid")
	d = lifecycleGateway(t, state, onDemandBackend)
	changed := make(chan struct{}, 16)
	cs = d.Connect(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	names := testutil.ToolNames(t, cs)
	if names["lazy__pid"] || !names["lazy__echo"] {
		data, _ := os.ReadFile(cache)
		t.Fatalf("tools from a cache without pid: %v; the cache holds:\n%s", names, data)
	}
	testutil.MustCallTool(t, cs, "lazy__echo", map[string]any{"text": "start"})
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no tools/list_changed after the start found a tool the cache lacked")
	}
	if !testutil.ToolNames(t, cs)["lazy__pid"] {
		t.Error("lazy__pid is not listed after the start")
	}
	d.Terminate(t)

	// A corrupt cache is reported, ignored, and written anew.
	if err := os.WriteFile(cache, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	d = lifecycleGateway(t, state, onDemandBackend)
	d.Stderr.Await(t, 10*time.Second, "the corrupt cache reported", func(out string) bool {
		return strings.Contains(out, "ignoring the catalog cache "+cache)
	})
	testutil.Eventually(t, 30*time.Second, "a valid cache to be written again", func() bool {
		data, err := os.ReadFile(cache)
		return err == nil && json.Valid(data) && len(children(d)) == 0
	})
	cs = d.Connect(t, nil)
	if _, n := counter(t, testutil.MustCallTool(t, cs, "lazy__pid", nil).StructuredContent); n != 1 {
		t.Errorf("after a corrupt cache: count %d, want 1", n)
	}
}

// staleCache removes the tool named drop from a catalog cache file.
func staleCache(t *testing.T, path, drop string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]json.RawMessage
	var tools []map[string]any
	if err := json.Unmarshal(data, &f); err != nil || json.Unmarshal(f["tools"], &tools) != nil {
		t.Fatalf("cache %s: %v\n%s", path, err, data)
	}
	kept := tools[:0]
	for _, tool := range tools {
		if tool["name"] != drop {
			kept = append(kept, tool)
		}
	}
	if len(kept) == len(tools) {
		t.Fatalf("cache %s has no tool %q", path, drop)
	}
	f["tools"], _ = json.Marshal(kept)
	data, _ = json.Marshal(f)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// With idle_exit, the gateway exits once no session is open and no backend
// process runs; an open session keeps it, even with every backend idle.
func TestIdleExit(t *testing.T) {
	bins := testutil.Build(t)
	toml, url := testutil.Config(t, strings.ReplaceAll(`
[backends.lazy]
command = "FAKE"
start = "on-demand"
idle_stop = "200ms"
`, "FAKE", bins.Fake))
	toml = strings.Replace(toml, "[gateway]\n", "[gateway]\nidle_exit = \"500ms\"\n", 1)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: []string{"STATE_DIRECTORY=" + t.TempDir()}})
	d.Stderr.Await(t, 30*time.Second, "the catalog cache filled", func(out string) bool {
		return strings.Contains(out, "its catalog is cached")
	})
	cs := d.Connect(t, nil)
	testutil.MustCallTool(t, cs, "lazy__echo", map[string]any{"text": "wake"})
	d.Stderr.Await(t, 30*time.Second, "lazy stopped by idle_stop", func(out string) bool {
		return strings.Contains(out, "no call and no subscription for 200ms (idle_stop)")
	})
	select {
	case <-d.Exited():
		t.Fatalf("mcpgated exited while a session was open:\n%s", d.Stderr.String())
	case <-time.After(2 * time.Second): // four idle_exit periods
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if code := d.AwaitExit(t, 30*time.Second); code != 0 {
		t.Errorf("mcpgated exited with %d after idle_exit, want 0", code)
	}
	if !strings.Contains(d.Stderr.String(), "(idle_exit)") {
		t.Errorf("the exit does not say why:\n%s", d.Stderr.String())
	}
	if kids := children(d); len(kids) > 0 {
		t.Errorf("processes left after the idle exit: %v", kids)
	}
}
