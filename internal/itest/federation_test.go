package itest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// wait bounds each await of the federation test; a deadline, not a
// measurement.
const wait = 30 * time.Second

// mcpgate behind mcpgate: gateway A runs two stdio backends; gateway B has
// A as a remote backend under the prefix a__ and one stdio backend of its
// own. A client of B sees and calls all three; sampling and progress from
// A's backends reach it; a crash of A's child reaches it as list_changed
// while the rest of A keeps serving.
func TestGatewayBehindGateway(t *testing.T) {
	a := gateway(t, `
[backends.one]
command = "FAKE"
args = ["--tools", "only_one"]
restart_backoff_initial = "50ms"
catalog_grace = "off"

[backends.two]
command = "FAKE"
restart_backoff_initial = "50ms"
`)
	b := gateway(t, fmt.Sprintf(`
[backends.a]
url = %q
tool_prefix = "a__"
restart_backoff_initial = "50ms"

[backends.own]
command = "FAKE"
`, a.URL))
	events := testutil.NewClientEvents("b-client")
	cs := b.Connect(t, events.ClientOptions())

	names := testutil.ToolNames(t, cs)
	for _, want := range []string{"a__one__echo", "a__one__only_one", "a__two__echo", "own__echo"} {
		if !names[want] {
			t.Errorf("tool %s missing from B's catalog %v", want, names)
		}
	}
	for tool, text := range map[string]string{"a__one__echo": "via A one", "a__two__echo": "via A two", "own__echo": "via B"} {
		if got := testutil.ToolText(testutil.MustCallTool(t, cs, tool, map[string]any{"text": text})); got != text {
			t.Errorf("%s = %q, want %q", tool, got, text)
		}
	}

	// Sampling asked by a child of A is answered by the client of B.
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "a__one__sample", nil)); !strings.Contains(got, "from b-client") {
		t.Errorf("a__one__sample = %q, want the answer of B's client", got)
	}
	// Progress of a child of A reaches the client of B under its token.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{
		Name: "a__two__progress", Arguments: map[string]any{"steps": 3}, Meta: mcp.Meta{"progressToken": "two-hops"},
	})
	if err != nil || res.IsError {
		t.Fatalf("a__two__progress: %v %v", err, res)
	}
	progress := events.Await(t, 3, wait, "progress from A's child", func(ev testutil.ClientEvent) bool {
		p, ok := ev.Params.(*mcp.ProgressNotificationParams)
		return ok && p.ProgressToken == "two-hops"
	})
	if len(progress) != 3 {
		t.Errorf("%d progress notifications, want 3", len(progress))
	}

	// Killing A's child: with catalog_grace off, B sees list_changed, not an
	// error storm; A's other backend serves throughout, and the child's
	// tools come back.
	before := events.Count(testutil.Method("notifications/tools/list_changed"))
	pid := testutil.FakeProcess(t, cs, "a__one__pid").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	events.Await(t, before+1, wait, "list_changed after A's child died", testutil.Method("notifications/tools/list_changed"))
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "a__two__echo", map[string]any{"text": "still"})); got != "still" {
		t.Errorf("a__two__echo while A's other child restarts = %q", got)
	}
	testutil.Eventually(t, wait, "a__one__echo back after the restart", func() bool {
		res, err := testutil.CallTool(t, cs, "a__one__echo", map[string]any{"text": "back"})
		return err == nil && testutil.ToolText(res) == "back"
	})
	if after := testutil.FakeProcess(t, cs, "a__one__pid").PID; after == pid {
		t.Errorf("A's child has the same pid %d after it was killed", pid)
	}

	// With the default catalog_grace, B's catalog does not change at all
	// while A's child restarts; calls work again once it is back.
	pid = testutil.FakeProcess(t, cs, "a__two__pid").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !testutil.ToolNames(t, cs)["a__two__echo"] {
		t.Error("a__two__echo left B's catalog during catalog_grace")
	}
	testutil.Eventually(t, wait, "a__two__echo served by a new child", func() bool {
		res, err := testutil.CallTool(t, cs, "a__two__pid", nil)
		return err == nil && !res.IsError && testutil.FakeProcess(t, cs, "a__two__pid").PID != pid
	})
}
