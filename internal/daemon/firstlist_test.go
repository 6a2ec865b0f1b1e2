package daemon_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestFirstConnectionSeesTheCatalog starts mcpgated under the real
// systemd-socket-activate, the first connection starting it, with three
// backends: fast (a fake server that answers at once), slow (held in its
// handshake until the test opens its barrier) and hang (held for good,
// until its handshake times out). The first connection's call to fast's
// tool, right after initialize, waits for fast's handshake instead of
// finding no such tool; its first tools/list waits for the backends still
// in their first handshake, at most first_list_wait, and has fast's tools
// without waiting for slow or hang; a call to slow's tool while it is
// held waits its start_wait and says the backend is still starting; slow
// joins with list_changed once it is ready, and READY=1 comes only once
// slow and hang have decided their first start.
func TestFirstConnectionSeesTheCatalog(t *testing.T) {
	dir := t.TempDir()
	slowGate, hangGate := filepath.Join(dir, "slow.record"), filepath.Join(dir, "hang.record")
	port := testutil.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	toml, _ := config(t, "first_list_wait = \"3s\"\n", fmt.Sprintf(`
[backends.fast]
command = "FAKE"

[backends.slow]
command = "FAKE"
args = ["--record", %q, "--initialize-barrier", "2"]
start_wait = "1s"

[backends.hang]
command = "FAKE"
args = ["--record", %q, "--initialize-barrier", "2"]
timeout = "4s"
max_restarts = 0
`, slowGate, hangGate))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{NoWait: true, Activate: []string{
		"-l", fmt.Sprintf("127.0.0.1:%d", port), "--fdname=http",
	}})

	// The first connection starts the daemon; its first call is to fast.
	ev := testutil.NewClientEvents("first")
	cs := testutil.Connect(t, url, ev.ClientOptions())
	res := testutil.MustCallTool(t, cs, "fast__echo", map[string]any{"text": "first"})
	if got := testutil.ToolText(res); got != "first" || res.IsError {
		t.Errorf("fast__echo as the first call = %q (error %v); want it answered once fast is ready", got, res.IsError)
	}
	names := testutil.ToolNames(t, cs)
	if !names["fast__echo"] || names["slow__echo"] || countPrefix(names, "hang__") > 0 {
		t.Errorf("the first tools/list: %v; want fast's tools, not slow's or hang's", names)
	}
	// Neither wait was for slow's handshake: it is still held, and the
	// daemon is not ready.
	if m := recorded(t, slowGate); len(m) != 1 || m[0] != "initialize" {
		t.Fatalf("slow recorded %q, want only its initialize (still held)", m)
	}
	if i := index(d.Notify.Messages(), testutil.Has("READY=1")); i >= 0 {
		t.Fatal("READY=1 while slow's handshake is held")
	}

	// A call to slow's tool waits its start_wait, then names the backend.
	held, err := testutil.CallTool(t, cs, "slow__echo", map[string]any{"text": "early"})
	if err == nil && !held.IsError || !strings.Contains(errText(held, err), `backend "slow", whose tools are named "slow__"…, is still in its first handshake`) {
		t.Errorf("slow__echo while slow is held: %s; want the error that slow is still starting", errText(held, err))
	}

	// Once slow is ready its tools join with list_changed.
	listChanged := testutil.Method("notifications/tools/list_changed")
	seen := ev.Count(listChanged)
	openGate(t, slowGate)
	for n := seen + 1; ; n++ {
		ev.Await(t, n, wait, "tools/list_changed once slow is ready", listChanged)
		if testutil.ToolNames(t, cs)["slow__echo"] {
			break
		}
		if n > seen+2 {
			t.Fatalf("no slow__echo after %d tools/list_changed", n)
		}
	}
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "slow__echo", map[string]any{"text": "later"})); got != "later" {
		t.Errorf("slow__echo once slow is ready = %q", got)
	}
	// READY=1 waits for hang's first attempt, which its timeout ends.
	d.AwaitReady(t)
	if m := recorded(t, hangGate); len(m) == 0 || m[0] != "initialize" {
		t.Errorf("hang recorded %q, want its initialize", m)
	}
}

// errText is what a failed tool call says: its error, or its result's text.
func errText(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	return testutil.ToolText(res)
}
