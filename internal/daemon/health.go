package daemon

import (
	"os"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// health is the front's HealthFunc: whether this host takes new sessions,
// as a load balancer asks it on /healthz. It does while the daemon is ready
// (READY=1 sent), not stopping, and at least one backend can take a call
// now: one in state healthy with its circuit closed, or an idle on-demand
// one, which starts on its first call. A backend that is starting,
// unhealthy (failed health checks or an open circuit), stopped or failed
// does not count. The reason names no backend: the caller is anonymous.
func (d *daemon) health() (ok bool, reason string) {
	switch {
	case !d.ready.Load():
		return false, "starting"
	case d.gw.Draining():
		return false, "draining"
	}
	for _, b := range d.sup.Backends() {
		if backendServes(b) {
			return true, ""
		}
	}
	return false, "no healthy backend"
}

// backendServes reports whether b counts towards the host's health.
func backendServes(b *backend.Backend) bool {
	switch b.State() {
	case backend.Healthy:
		return b.Health().CircuitOpen.IsZero()
	case backend.Idle:
		return true
	}
	return false
}

// hostLabel is the value of the host label on every metric: the host name
// (one value per process, so the label's cardinality is the number of
// hosts), or "localhost" when the kernel gives none.
func hostLabel() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}
