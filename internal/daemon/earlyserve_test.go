package daemon_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestClientsServedWhileABackendStarts starts mcpgated under the real
// systemd-socket-activate with a healthy backend and one held in its
// handshake (the fake server's barrier, which the test opens): the first
// connection's initialize and a call to the healthy backend are answered
// while the other is still in its handshake and before READY=1; once the
// slow one is ready its tools join with tools/list_changed, and READY=1
// follows (issue 22, item 1).
func TestClientsServedWhileABackendStarts(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "slow.record")
	port := testutil.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	toml, _ := config(t, "", fmt.Sprintf(`
[backends.ok]
command = "FAKE"

[backends.slow]
command = "FAKE"
args = ["--record", %q, "--initialize-barrier", "2"]
`, gate))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{NoWait: true, Activate: []string{
		"-l", fmt.Sprintf("127.0.0.1:%d", port), "--fdname=http",
	}})

	// The first connection starts the daemon; slow's handshake is held.
	ev := testutil.NewClientEvents("early")
	cs := testutil.Connect(t, url, ev.ClientOptions())
	if name := cs.InitializeResult().ServerInfo.Name; name != "mcpgate" {
		t.Fatalf("serverInfo.name %q, want mcpgate", name)
	}
	if c := cs.InitializeResult().Capabilities.Tools; c == nil || !c.ListChanged {
		t.Fatalf("tools capability %+v while a backend starts, want listChanged", c)
	}
	// ok joins as any backend does; slow stays in its handshake.
	d.AwaitNotify(t, 0, wait, "ok healthy, slow starting", func(m string) bool {
		v, _ := value(m, "STATUS")
		return strings.HasPrefix(v, "1/2 backends healthy, ") && strings.HasSuffix(v, "; slow starting")
	})
	res := testutil.MustCallTool(t, cs, "ok__echo", map[string]any{"text": "hello"})
	if got := testutil.ToolText(res); got != "hello" {
		t.Errorf("ok__echo answered %q, want hello", got)
	}
	names := testutil.ToolNames(t, cs)
	if !names["ok__echo"] || names["slow__echo"] {
		t.Errorf("tools while slow is in its handshake: %v; want ok's, not slow's", names)
	}
	// Both answers came while slow's handshake was held: it has not
	// answered its initialize, so the daemon cannot be ready.
	if i := index(d.Notify.Messages(), testutil.Has("READY=1")); i >= 0 {
		t.Fatal("READY=1 while slow's handshake is held")
	}
	if m := recorded(t, gate); len(m) != 1 || m[0] != "initialize" {
		t.Fatalf("slow recorded %q, want only its initialize (still held)", m)
	}

	// ok's own arrival may have been announced too; slow's tools come with
	// a later list_changed.
	listChanged := testutil.Method("notifications/tools/list_changed")
	seen := ev.Count(listChanged)
	openGate(t, gate)
	for n := seen + 1; ; n++ {
		ev.Await(t, n, wait, "tools/list_changed once slow is ready", listChanged)
		if testutil.ToolNames(t, cs)["slow__echo"] {
			break
		}
		if n > seen+2 {
			t.Fatalf("no slow__echo after %d tools/list_changed", n)
		}
	}
	d.AwaitReady(t)
}
