package itest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// logLevel returns the level a fakeserver was last given by
// logging/setLevel, through its tool loglevel.
func logLevel(t *testing.T, cs *mcp.ClientSession, tool string) string {
	t.Helper()
	return testutil.ToolText(testutil.MustCallTool(t, cs, tool, nil))
}

// logging/setLevel is per session (issue 21, defect 9): a backend gets the
// most verbose level that a session which may see it asked for, a session
// never changes the level of a backend it cannot see, and each session
// gets only the log messages at or above its own level.
func TestLogLevelIsPerSession(t *testing.T) {
	d, _ := accessGateway(t)
	full := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), nil)
	narrowEvents := testutil.NewClientEvents("narrow")
	narrow := testutil.ConnectHTTP(t, d.URL, tokenClient(narrowToken), narrowEvents.ClientOptions())
	ctx := testutil.Context(t, 60*time.Second)
	setLevel := func(cs *mcp.ClientSession, level mcp.LoggingLevel) {
		t.Helper()
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
			t.Fatalf("logging/setLevel %s: %v", level, err)
		}
	}
	setLevel(full, "warning")
	setLevel(narrow, "debug") // narrow sees a, not b
	if got := logLevel(t, full, "a__loglevel"); got != "debug" {
		t.Errorf("a's level = %q after narrow asked for debug, want debug", got)
	}
	if got := logLevel(t, full, "b__loglevel"); got != "warning" {
		t.Errorf("b's level = %q; narrow, which cannot see b, changed it (full asked for warning)", got)
	}
	setLevel(full, "error") // less verbose than narrow: a stays at debug
	if got := logLevel(t, full, "a__loglevel"); got != "debug" {
		t.Errorf("a's level = %q after full asked for error, want debug, which narrow still asks for", got)
	}
	if got := logLevel(t, full, "b__loglevel"); got != "error" {
		t.Errorf("b's level = %q, want error", got)
	}

	fullEvents := testutil.NewClientEvents("full")
	full2 := testutil.ConnectHTTP(t, d.URL, tokenClient(fullToken), fullEvents.ClientOptions())
	setLevel(full2, "error")
	data := func(want string) func(testutil.ClientEvent) bool {
		return func(ev testutil.ClientEvent) bool {
			p, ok := ev.Params.(*mcp.LoggingMessageParams)
			return ok && p.Data == want
		}
	}
	testutil.MustCallTool(t, full2, "a__log", map[string]any{"level": "info", "data": "below error"})
	testutil.MustCallTool(t, full2, "a__log", map[string]any{"level": "error", "data": "barrier"})
	fullEvents.Await(t, 1, 30*time.Second, "full's error message", data("barrier"))
	if n := fullEvents.Count(data("below error")); n != 0 {
		t.Errorf("a session at level error got an info message a backend sent at another session's level")
	}
	testutil.MustCallTool(t, narrow, "a__log", map[string]any{"level": "debug", "data": "narrow's debug"})
	narrowEvents.Await(t, 1, 30*time.Second, "narrow's debug message", data("narrow's debug"))

	// Once narrow is gone, a logs at the level the others asked for.
	narrow.Close()
	testutil.Eventually(t, 30*time.Second, "a back at level error after narrow left", func() bool {
		return logLevel(t, full, "a__loglevel") == "error"
	})
}

// An unknown notification from a client with a policy cannot be checked
// against it: it is dropped, not sent to the only backend (issue 21,
// defect 9). A client without a policy still reaches that backend.
func TestUnknownNotificationFromRestrictedClientIsDropped(t *testing.T) {
	bins := testutil.Build(t)
	record := t.TempDir() + "/a.record"
	backends := fmt.Sprintf(`
[backends.a]
command = %q
args = ["--tools", "alpha", "--record", %q]

[clients.full]
token_sha256 = %q

[clients.narrow]
token_sha256 = %q
tools = ["a__alpha"]
`, bins.Fake, record, sha256Hex(fullToken), sha256Hex(narrowToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	narrow := rawSessionOf(t, d.URL, narrowToken, "2025-11-25")
	full := rawSessionOf(t, d.URL, fullToken, "2025-11-25")
	narrow.notify(`{"jsonrpc":"2.0","method":"notifications/from_narrow","params":{}}`)
	full.notify(`{"jsonrpc":"2.0","method":"notifications/from_full","params":{}}`)
	lines := awaitLines(t, record, "notifications/from_full")
	if strings.Contains(strings.Join(lines, "\n"), "notifications/from_narrow") {
		t.Errorf("the backend got an unknown notification from a client with a policy")
	}
}
