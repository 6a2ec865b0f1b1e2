package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// watch runs the health checks and the periodic catalog refresh of one
// child until it is gone. The supervision starts it after the handshake.
//
// A check is a ping; any answer within health_timeout, a JSON-RPC error
// included, is alive: a server without ping is not sick. failure_threshold
// failed checks in a row open the circuit; health_interval ×
// recovery_multiplier later one half-open check runs, which closes the
// circuit or kills the child, whose restart then counts against
// max_restarts like any crash.
func (b *Backend) watch(conn *Conn) {
	h := b.cfg.Health
	var checks, refresh <-chan time.Time
	var checkTimer *time.Timer
	if h.HealthInterval > 0 {
		checkTimer = time.NewTimer(h.HealthInterval)
		defer checkTimer.Stop()
		checks = checkTimer.C
	}
	if h.CatalogRefresh > 0 {
		tick := time.NewTicker(h.CatalogRefresh)
		defer tick.Stop()
		refresh = tick.C
	}
	for {
		select {
		case <-conn.Done():
			return
		case <-refresh:
			conn.lists.refreshAll()
		case <-checks:
			next, alive := b.check(conn)
			if !alive {
				return
			}
			checkTimer.Reset(next)
		}
	}
}

// check runs one round of the health loop and returns when the next is due.
// alive is false once the child has been killed.
func (b *Backend) check(conn *Conn) (next time.Duration, alive bool) {
	h := b.cfg.Health
	if open, retryAt := b.circuitOpen(); open {
		if wait := time.Until(retryAt); wait > 0 {
			return wait, true
		}
		ok, latency := b.ping(conn)
		b.recordCheck(ok, latency)
		if ok {
			b.resetCircuit()
			b.log.Info(fmt.Sprintf("backend %q answered its half-open health check; circuit closed", b.name), "latency", latency, journal.MessageCircuitClosed.Attr())
			b.setState(Healthy, func(st *Status) { st.LastError = "" })
			return h.HealthInterval, true
		}
		b.log.Warn(fmt.Sprintf("backend %q failed its half-open health check; killing it to restart it", b.name), conn.ident())
		conn.reason.Store(ptr("did not answer its half-open health check"))
		conn.abort()
		return 0, false
	}
	if since := b.sinceHeard(); since < h.HealthInterval {
		// Traffic is proof of life. The next check is due one interval
		// after the last answer, so the skip does not delay detection.
		b.recordSkip()
		return h.HealthInterval - since, true
	}
	start := time.Now()
	ok, latency := b.ping(conn)
	b.log.Debug("health check", "ok", ok, "latency", latency)
	opened, changed := b.recordCheck(ok, latency)
	if opened {
		_, retryAt := b.circuitOpen()
		b.log.Warn(fmt.Sprintf("backend %q failed its health checks; circuit open, calls fail at once until it is checked again", b.name),
			"failures", h.FailureThreshold, "health_timeout", h.HealthTimeout, "retry_in", time.Until(retryAt).Round(time.Millisecond),
			journal.MessageCircuitOpen.Attr())
		b.setState(Unhealthy, func(st *Status) {
			st.LastError = "did not answer ping within health_timeout " + h.HealthTimeout.String() + "; circuit open"
			st.Cause = st.LastError
		})
		return time.Until(retryAt), true
	}
	if changed {
		b.changed() // ConsecutiveFailures changed
	} else {
		b.callsChanged() // LastCheckTimestamp and its latency changed
	}
	return max(h.HealthInterval-time.Since(start), 0), true
}

// recordSkip clears the failure count of a child whose calls get answers.
func (b *Backend) recordSkip() {
	m := &b.mon
	m.mu.Lock()
	changed := m.failures != 0
	m.failures = 0
	m.mu.Unlock()
	if changed {
		b.changed()
	}
}

// ping checks the child once. Any answer within health_timeout is alive.
func (b *Backend) ping(conn *Conn) (ok bool, latency time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.HealthTimeout)
	defer cancel()
	start := time.Now()
	_, err := conn.Call(ctx, conn.pingMethod(), nil)
	latency = time.Since(start)
	var rpcErr *jsonrpc.Error
	return err == nil || errors.As(err, &rpcErr), latency
}

// refreshAll asks for a re-read of every list, as if the child had sent
// list_changed for each: for servers that change their lists silently.
func (r *refresher) refreshAll() {
	r.dirty.Or(listAll)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
