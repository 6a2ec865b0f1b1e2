package dbusapi_test

import (
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/dbustest"
)

// The health and call properties are announced with PropertiesChanged: an
// opening circuit, and every call.
func TestHealthAndCallPropertiesChange(t *testing.T) {
	g := startGateway(t, dbustest.Options{}, `
[backends.deaf]
command = "FAKE"
args = ["--ping", "never"]
health_interval = "200ms"
health_timeout = "100ms"
failure_threshold = 2
recovery_multiplier = 1000

[backends.ok]
command = "FAKE"
`, "")
	g.await(t, 0, "deaf's circuit to open", changed("deaf", func(p map[string]dbus.Variant) bool {
		v, ok := p["CircuitOpenTimestamp"]
		return ok && v.Value().(uint64) != 0
	}))
	if got := g.property(t, "deaf", "ConsecutiveFailures"); got != "u 2" {
		t.Errorf("ConsecutiveFailures = %s, want u 2", got)
	}
	if got := g.property(t, "deaf", "State"); got != `s "unhealthy"` {
		t.Errorf("State = %s, want unhealthy", got)
	}
	from := g.mark()
	cs := g.daemon.Connect(t, nil)
	testutil.MustCallTool(t, cs, "ok__echo", map[string]any{"text": "counted"})
	g.await(t, from, "ok's NCalls to reach 1", changed("ok", is("NCalls", uint64(1))))
	if got := g.property(t, "ok", "NFailedCalls"); got != "t 0" {
		t.Errorf("NFailedCalls = %s, want t 0", got)
	}
	if _, err := testutil.CallTool(t, cs, "deaf__echo", nil); err == nil {
		t.Error("a call to deaf succeeded while its circuit is open")
	}
	g.await(t, from, "deaf's NFailedCalls to reach 1", changed("deaf", is("NFailedCalls", uint64(1))))
}
