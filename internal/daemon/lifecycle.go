package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// defaultStateDir is where the daemon keeps state when systemd's
// StateDirectory= does not name a place ($STATE_DIRECTORY).
const defaultStateDir = "/var/lib/mcpgate"

// sinkKey names a journal sink: a backend, and its instance number (0 for
// the backend itself).
type sinkKey struct {
	cfg      *config.Backend
	instance int
}

// instanceLabel is the MCPGATE_INSTANCE value of instance n.
func instanceLabel(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// stateDir returns the daemon's state directory: the first of
// $STATE_DIRECTORY (set by StateDirectory= in the unit), else
// /var/lib/mcpgate.
func stateDir() string {
	if dirs := os.Getenv("STATE_DIRECTORY"); dirs != "" {
		first, _, _ := strings.Cut(dirs, ":")
		return first
	}
	return defaultStateDir
}

// CatalogCachePath is where an on-demand backend's catalog is kept.
func catalogCachePath(name string) string {
	return filepath.Join(stateDir(), "catalog", name+".json")
}

// lifecycleOptions adds what start = "on-demand", idle_stop and instance =
// "session" need to a backend's options.
func (d *daemon) lifecycleOptions(cfg *config.Backend, opts *backend.Options) {
	if cfg.OnDemand() || cfg.IdleStop > 0 {
		opts.CatalogCache = catalogCachePath(cfg.Name)
		opts.InUse = func(b *backend.Backend) bool { return d.gw.Subscribed(b.Name()) }
	}
	if cfg.Pooled() {
		opts.InstanceOptions = func(n int) backend.Options {
			o := d.instanceOptions(cfg, n)
			o.Release = func() { d.releaseInstanceSink(cfg, n) }
			return o
		}
	}
}

// instanceRows shows the instances of a pooled backend on D-Bus: one row
// each, the number of idle ones (running, bound to no session) and of busy
// ones (bound to a session).
func instanceRows(b *backend.Backend) (rows []dbusapi.Instance, idle, busy uint32) {
	for _, in := range b.Instances() {
		row := dbusapi.Instance{PID: uint32(in.PID), Session: gateway.SessionHash(in.Owner), State: in.State.String(), Name: in.Unit}
		switch {
		case in.Owner != nil:
			busy++
		case in.State == backend.Healthy:
			idle++
		}
		rows = append(rows, row)
	}
	return rows, idle, busy
}

// idleExit returns a channel that becomes ready once, for [gateway]
// idle_exit, no client session was open and no backend process ran: every
// backend is idle on demand, stopped or failed. Under socket activation
// systemd keeps the socket and starts mcpgated again for the next client,
// so an idle host runs nothing but the socket. Without idle_exit the
// channel never becomes ready. stop ends the watch.
func (d *daemon) idleExit(ctx context.Context) (idle <-chan struct{}, stop func()) {
	after := d.cfg.Gateway.IdleExit
	if after <= 0 {
		return nil, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{})
	go func() {
		tick := time.NewTicker(max(after/4, 10*time.Millisecond))
		defer tick.Stop()
		since := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if d.busy() {
					since = now
				} else if now.Sub(since) >= after {
					close(ch)
					return
				}
			}
		}
	}()
	return ch, cancel
}

// busy reports whether a client session is open or a backend process runs.
func (d *daemon) busy() bool {
	if d.gw.NumSessions() > 0 {
		return true
	}
	for _, b := range d.sup.Backends() {
		switch b.State() {
		case backend.Starting, backend.Healthy, backend.Unhealthy:
			return true
		}
		if len(b.Instances()) > 0 {
			return true
		}
	}
	return false
}
