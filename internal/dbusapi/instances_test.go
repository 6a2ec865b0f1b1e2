package dbusapi_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// A pooled backend shows its instances, idle and busy, and a backend
// stopped by idle_stop is "idle", not "stopped"; mcpgatectl status NAME
// lists the instances.
func TestInstancesAndIdleState(t *testing.T) {
	g := startGateway(t, dbustest.Options{}, `
[backends.ded]
command = "FAKE"
instance = "session"
pool_min_idle = 1
pool_max = 3
pool_replenish_delay = "50ms"

[backends.lazy]
command = "FAKE"
idle_stop = "300ms"
`, "")
	g.await(t, 0, "one idle instance of ded", changed("ded", is("NIdle", uint32(1))))
	from := g.mark()
	cs := g.daemon.Connect(t, nil)
	var counted struct{ PID int }
	raw, _ := json.Marshal(testutil.MustCallTool(t, cs, "ded__pid", nil).StructuredContent)
	json.Unmarshal(raw, &counted)
	g.await(t, from, "a busy instance of ded", changed("ded", is("NBusy", uint32(1))))
	// The refill may come in the same PropertiesChanged or a later one.
	var b dbusapi.BackendStatus
	testutil.Eventually(t, 30*time.Second, "ded with one busy and one fresh idle instance", func() bool {
		var err error
		b, err = g.client.Backend(ctx(t), "ded")
		return err == nil && b.NBusy == 1 && b.NIdle == 1
	})
	var busy int
	for _, in := range b.Instances {
		if in.Session == "" {
			continue
		}
		busy++
		if in.Name != "ded-1" || int(in.PID) != counted.PID || in.State != "healthy" || len(in.Session) != 12 {
			t.Errorf("busy instance %+v; want ded-1, pid %d, healthy, a 12-digit session hash", in, counted.PID)
		}
	}
	if busy != 1 {
		t.Errorf("instances %+v; want one bound to the session", b.Instances)
	}
	if got := g.property(t, "ded", "Instances"); !strings.HasPrefix(got, "a(usss) ") {
		t.Errorf("Instances = %s, want type a(usss)", got)
	}

	ctl := exec.Command(testutil.Build(t).Ctl, "status", "ded")
	ctl.Env = testutil.Env("DBUS_SYSTEM_BUS_ADDRESS=" + g.bus.Address)
	out, err := ctl.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Instances: 1 busy, 1 idle") || !strings.Contains(string(out), "ded-1") {
		t.Errorf("mcpgatectl status ded: %v\n%s", err, out)
	}

	g.await(t, 0, "lazy to go idle", changed("lazy", is("State", "idle")))
	from = g.mark()
	testutil.MustCallTool(t, cs, "lazy__echo", map[string]any{"text": "wake up"})
	g.await(t, from, "lazy to run again", changed("lazy", is("State", "healthy")))
}
