package itest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Through a crash the tools stay listed for catalog_grace; when the grace
// ends without the backend back, they go, with exactly one list_changed.
func TestCatalogGraceEndsWithOneListChanged(t *testing.T) {
	d := gateway(t, `
[backends.g]
command = "FAKE"
catalog_grace = "300ms"
restart_backoff_initial = "1h"
restart_backoff_max = "1h"
`)
	events := testutil.NewClientEvents("g")
	cs := d.Connect(t, events.ClientOptions())
	if _, err := testutil.CallTool(t, cs, "g__crash", nil); err == nil {
		t.Fatal("crash answered")
	}
	events.Await(t, 1, 30*time.Second, "tools/list_changed when the grace ended", testutil.Method("notifications/tools/list_changed"))
	if names := testutil.ToolNames(t, cs); names["g__echo"] {
		t.Errorf("g__echo still listed after catalog_grace: %v", names)
	}
	if n := events.Count(testutil.Method("notifications/tools/list_changed")); n != 1 {
		t.Errorf("%d tools/list_changed, want exactly 1", n)
	}
}

// A call to a backend restarting after a crash waits start_wait for it,
// then fails with an error that says so.
func TestStartWaitExpires(t *testing.T) {
	d := gateway(t, `
[backends.w]
command = "FAKE"
start_wait = "200ms"
restart_backoff_initial = "1h"
restart_backoff_max = "1h"
`)
	c := newRawClient(t, d.URL)
	c.post(t, callBody(1, "w__crash", `{}`))
	a := lastAnswer(t, c.post(t, callBody(2, "w__echo", `{"text":"waiting"}`)))
	if a.Error == nil || !strings.Contains(a.Error.Message, `backend "w" did not become healthy within start_wait (200ms)`) {
		t.Fatalf("call during the restart: %+v; want the start_wait error", a.Error)
	}
	var data struct{ Backend, State string }
	if err := json.Unmarshal(a.Error.Data, &data); err != nil || data.Backend != "w" || data.State != "starting" {
		t.Errorf("error data %s", a.Error.Data)
	}
	// A session that starts during the restart sees the tools kept for
	// catalog_grace, and the capability to list them.
	cs := d.Connect(t, nil)
	if cs.InitializeResult().Capabilities.Tools == nil || !testutil.ToolNames(t, cs)["w__echo"] {
		t.Errorf("a new session during the restart: capabilities %+v; want tools, w__echo listed", cs.InitializeResult().Capabilities)
	}
}

// catalog_refresh picks up tools a server changed without list_changed.
func TestCatalogRefreshFindsSilentChanges(t *testing.T) {
	d := gateway(t, "[backends.r]\ncommand = \"FAKE\"\ncatalog_refresh = \"100ms\"\n")
	events := testutil.NewClientEvents("r")
	cs := d.Connect(t, events.ClientOptions())
	testutil.MustCallTool(t, cs, "r__set_tools", map[string]any{"names": []string{"fresh"}, "burst": 0})
	events.Await(t, 1, 30*time.Second, "tools/list_changed after the refresh", testutil.Method("notifications/tools/list_changed"))
	if !testutil.ToolNames(t, cs)["r__fresh"] {
		t.Error("r__fresh not listed after catalog_refresh")
	}
}

// While a backend's circuit is open, its tools/call go to its fallback.
func TestFallbackWhileTheCircuitIsOpen(t *testing.T) {
	d := gateway(t, `
[backends.a]
command = "FAKE"
args = ["--ping", "never"]
fallback = ["b"]
health_interval = "200ms"
health_timeout = "100ms"
failure_threshold = 2
recovery_multiplier = 1000

[backends.b]
command = "FAKE"
`)
	awaitLog(t, d, "circuit open, calls fail at once")
	c := newRawClient(t, d.URL)
	a := lastAnswer(t, c.post(t, callBody(1, "a__echo", `{"text":"open"}`)))
	if a.Error != nil || !strings.Contains(string(a.Result), `"io.mcpgate/servedBy":"b"`) {
		t.Fatalf("call while a's circuit is open: %s %+v; want it served by b", a.Result, a.Error)
	}
}

// A backend that comes back from a crash with other lists is announced
// with exactly one list_changed; coming back with no tools at all after
// having had some is worth a warning.
func TestComingBackWithoutToolsWarnsAndAnnouncesOnce(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "no-tools")
	d := gateway(t, `
[backends.e]
command = "FAKE"
args = ["--no-tools-if", "`+flag+`"]
restart_backoff_initial = "10ms"
`)
	events := testutil.NewClientEvents("e")
	cs := d.Connect(t, events.ClientOptions())
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.CallTool(t, cs, "e__crash", nil)
	events.Await(t, 1, 30*time.Second, "tools/list_changed for the lost tools", testutil.Method("notifications/tools/list_changed"))
	awaitLog(t, d, `backend \"e\" came back with no tools after having had some`)
	if names := testutil.ToolNames(t, cs); len(names) != 0 {
		t.Errorf("tools after the restart: %v, want none", names)
	}
	if n := events.Count(testutil.Method("notifications/tools/list_changed")); n != 1 {
		t.Errorf("%d tools/list_changed, want exactly 1", n)
	}
}
