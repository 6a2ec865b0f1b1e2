package itest

import (
	"fmt"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// An operator's restart keeps the backend's tools listed and its calls
// waiting for the new child, as a crash does; mcpgate_backend_restarts_total
// is a counter that counts the crash's restart and, unlike NRestarts, is
// not reset by the operator's restart.
func TestOperatorRestartKeepsTheCatalog(t *testing.T) {
	bins := testutil.Build(t)
	bus := dbustest.Start(t, dbustest.Options{})
	port := testutil.FreePort(t)
	// Each handshake takes a while: the restart's window to look into.
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.c]
command = %q
args = ["--handshake-delay", "3s"]
restart_backoff_initial = "10ms"
`, bins.Fake), testutil.ConfigOptions{Bus: "session", Gateway: fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port)})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: []string{"DBUS_SESSION_BUS_ADDRESS=" + bus.Address}})
	conn, err := dbus.Connect(bus.Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	api := dbusapi.NewClient(conn)
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	cs := d.Connect(t, nil)

	first := testutil.FakeProcess(t, cs, "c__pid")
	if _, err := testutil.CallTool(t, cs, "c__crash", nil); err == nil {
		t.Fatal("crash answered")
	}
	awaitNewChild(t, cs, "c__pid", first.PID)
	fams := scrape(t, metrics)
	if f := fams["mcpgate_backend_restarts_total"]; f == nil || f.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("mcpgate_backend_restarts_total missing or not a counter: %v", f)
	}
	if got := value(t, fams, "mcpgate_backend_restarts_total", map[string]string{"backend": "c"}); got != 1 {
		t.Errorf("mcpgate_backend_restarts_total = %v after one crash, want 1", got)
	}
	before := testutil.FakeProcess(t, cs, "c__pid")

	restarted := make(chan error, 1)
	go func() { restarted <- api.RestartBackend(testutil.Context(t, time.Minute), "c") }()
	testutil.Eventually(t, 30*time.Second, "the backend starting again", func() bool {
		st, err := api.Backend(testutil.Context(t, 10*time.Second), "c")
		return err == nil && st.State == "starting"
	})
	if !testutil.ToolNames(t, cs)["c__echo"] {
		t.Error("c__echo vanished from the catalog during the operator's restart")
	}
	if st, _ := api.Backend(testutil.Context(t, 10*time.Second), "c"); st.State != "starting" {
		t.Logf("the restart ended before the catalog was read (state %s): the check above proves nothing this time", st.State)
	}
	after := testutil.FakeProcess(t, cs, "c__pid") // waits for the new child
	if after.PID == before.PID {
		t.Errorf("pid %d answered during the restart; want the new child's", after.PID)
	}
	if err := <-restarted; err != nil {
		t.Fatalf("RestartBackend: %v", err)
	}
	st, err := api.Backend(testutil.Context(t, 10*time.Second), "c")
	if err != nil || st.NRestarts != 0 {
		t.Errorf("NRestarts = %d (%v) after the operator's restart, want 0", st.NRestarts, err)
	}
	if got := value(t, scrape(t, metrics), "mcpgate_backend_restarts_total", map[string]string{"backend": "c"}); got != 1 {
		t.Errorf("mcpgate_backend_restarts_total = %v after the operator's restart, want still 1", got)
	}
}
