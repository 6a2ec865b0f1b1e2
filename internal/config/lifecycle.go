package config

import (
	"math"
	"time"
)

// Lifecycle are the backend keys that decide when a backend's children run
// and whom they serve: started at once or on the first call, stopped when
// idle, one child shared by every session or one per session from a pool.
// How long a call waits for a starting child is Health.StartWait.
type Lifecycle struct {
	Start              string        // "eager" (default) | "on-demand"
	IdleStop           time.Duration // 0 (default, "off"): never stopped for being idle
	Instance           string        // "shared" (default) | "session"
	PoolMinIdle        int           // default 1
	PoolMax            int           // default 20
	PoolAcquireTimeout time.Duration // default 30s
	PoolReplenishDelay time.Duration // default 2s
}

// Values of Lifecycle.Start and Lifecycle.Instance.
const (
	StartEager      = "eager"
	StartOnDemand   = "on-demand"
	InstanceShared  = "shared"
	InstanceSession = "session"
)

// defaultLifecycle is the one place that knows the defaults of Lifecycle.
func defaultLifecycle() Lifecycle {
	return Lifecycle{
		Start:              StartEager,
		Instance:           InstanceShared,
		PoolMinIdle:        1,
		PoolMax:            20,
		PoolAcquireTimeout: 30 * time.Second,
		PoolReplenishDelay: 2 * time.Second,
	}
}

// OnDemand reports whether the backend waits for its first call to start.
func (l *Lifecycle) OnDemand() bool { return l.Start == StartOnDemand }

// Pooled reports whether every session gets an instance of its own.
func (l *Lifecycle) Pooled() bool { return l.Instance == InstanceSession }

func lifecycleFields() []field[Backend] {
	return []field[Backend]{
		{"start", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.Start, oneOf(StartEager, StartOnDemand))
		}},
		{"idle_stop", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.durationOrOff(at, v, &b.IdleStop)
		}},
		{"instance", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.Instance, oneOf(InstanceShared, InstanceSession))
		}},
		{"pool_min_idle", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return integer(d, at, v, &b.PoolMinIdle, 0, math.MaxInt32)
		}},
		{"pool_max", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return integer(d, at, v, &b.PoolMax, 1, math.MaxInt32)
		}},
		{"pool_acquire_timeout", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.PoolAcquireTimeout)
		}},
		{"pool_replenish_delay", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.PoolReplenishDelay)
		}},
	}
}

// checkLifecycle reports combinations of lifecycle keys that cannot work.
func (d *decoder) checkLifecycle(at keyPath, t map[string]any, refused map[string]bool, b *Backend) {
	blame := func(keys ...string) keyPath {
		for _, k := range keys {
			if _, set := t[k]; set {
				return at.child(k)
			}
		}
		return at
	}
	if !refused["pool_min_idle"] && !refused["pool_max"] && b.PoolMinIdle > b.PoolMax {
		d.fail(blame("pool_min_idle", "pool_max"), "pool_min_idle (%d) is greater than pool_max (%d); lower the first or raise the second", b.PoolMinIdle, b.PoolMax)
	}
	if kind := nonProcessKind(t, b); kind != "" {
		for _, k := range []string{"start", "idle_stop", "instance", "pool_min_idle", "pool_max", "pool_acquire_timeout", "pool_replenish_delay", "runner"} {
			if _, set := t[k]; set {
				d.fail(at.child(k), "%s is for a backend whose server mcpgate runs as a process; a %s has none to start, stop or pool; remove it", k, kind)
			}
		}
		return
	}
	if !b.Pooled() {
		return
	}
	if b.OnDemand() {
		d.fail(blame("start"), `start = "on-demand" does not combine with instance = "session"; use pool_min_idle = 0 to start no instance before a session needs one`)
	}
	if b.IdleStop > 0 {
		d.fail(blame("idle_stop"), `idle_stop does not apply to instance = "session": a session's instance stops when the session ends; remove idle_stop`)
	}
}

// nonProcessKind names the kind of a backend that runs no server process
// (a remote server, or command-line tools run per call), or is "".
func nonProcessKind(t map[string]any, b *Backend) string {
	if _, remote := t["url"]; remote {
		return "remote backend (url)"
	}
	if b.Transport == "cli" {
		return `cli backend (transport = "cli")`
	}
	return ""
}

// idleExitField is [gateway] idle_exit: how long the gateway runs with no
// session open and no backend process running before it exits, for socket
// activation to start it again.
func idleExitField() field[Gateway] {
	return field[Gateway]{"idle_exit", func(d *decoder, at keyPath, v any, g *Gateway) bool {
		return d.durationOrOff(at, v, &g.IdleExit)
	}}
}

// firstListWaitField is [gateway] first_list_wait: how long, counted from
// a backend's first start, a session's first list waits for that
// backend's first handshake (socket activation's first client arrives
// before any backend is ready).
func firstListWaitField() field[Gateway] {
	return field[Gateway]{"first_list_wait", func(d *decoder, at keyPath, v any, g *Gateway) bool {
		if v == "0s" {
			g.FirstListWait = 0
			return true
		}
		if !d.durationOrOff(at, v, &g.FirstListWait) {
			return false
		}
		if g.FirstListWait > time.Minute {
			d.fail(at, "%s is longer than a minute: a client's first list would wait that long for a slow backend; use a few seconds, or \"off\"", g.FirstListWait)
			return false
		}
		return true
	}}
}
