package backend

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Health is a snapshot of a backend's health checks, circuit breaker and
// calls.
type Health struct {
	ConsecutiveFailures int           // failed health checks in a row
	LastCheck           time.Time     // when the last check ended; zero before the first
	LastCheckLatency    time.Duration // how long the last check took
	LastCheckOK         bool
	CircuitOpen         time.Time // when the circuit opened; zero while closed
	RetryAt             time.Time // when the half-open check runs; zero while closed
	CallsInFlight       int       // calls admitted and not yet answered
	CallsQueued         int       // calls waiting for max_concurrent_calls
	NCalls              uint64    // calls routed to the backend, refused ones included
	NFailedCalls        uint64    // calls that ended without a result, refused ones included
	NFallbacks          uint64    // calls served by a fallback after this backend could not
}

// monitor is a backend's health and call bookkeeping. The breaker fields
// are guarded by mu; the counters are atomic.
type monitor struct {
	mu          sync.Mutex
	failures    int
	lastCheck   time.Time
	lastLatency time.Duration
	lastOK      bool
	openSince   time.Time
	retryAt     time.Time
	wake        chan struct{} // closed and replaced on every change of the backend
	open        atomic.Bool   // openSince is set: calls read it without mu

	calls, failed, fallbacks atomic.Uint64
	toolsSeen                atomic.Bool  // some handshake or refresh listed tools
	heard                    atomic.Int64 // unix nanoseconds of the last response from the child
}

// Health returns a snapshot of the backend's health and calls.
func (b *Backend) Health() Health {
	m := &b.mon
	m.mu.Lock()
	h := Health{
		ConsecutiveFailures: m.failures,
		LastCheck:           m.lastCheck,
		LastCheckLatency:    m.lastLatency,
		LastCheckOK:         m.lastOK,
		CircuitOpen:         m.openSince,
		RetryAt:             m.retryAt,
	}
	m.mu.Unlock()
	h.CallsInFlight, h.CallsQueued = b.lim.counts()
	h.NCalls, h.NFailedCalls, h.NFallbacks = m.calls.Load(), m.failed.Load(), m.fallbacks.Load()
	return h
}

// CountFallback records that a call this backend could not serve was
// served by one of its fallbacks.
func (b *Backend) CountFallback() { b.mon.fallbacks.Add(1) }

// circuitOpen reports whether the circuit is open, and when it is tried
// again.
func (b *Backend) circuitOpen() (bool, time.Time) {
	if !b.mon.open.Load() {
		return false, time.Time{} // the common case, without the lock
	}
	b.mon.mu.Lock()
	defer b.mon.mu.Unlock()
	return !b.mon.openSince.IsZero(), b.mon.retryAt
}

// recordCheck stores a health check's outcome and reports whether it opened
// the circuit and whether the count of failures changed.
func (b *Backend) recordCheck(ok bool, latency time.Duration) (opened, changed bool) {
	h := b.cfg.Health
	m := &b.mon
	now := time.Now()
	m.mu.Lock()
	m.lastCheck, m.lastLatency, m.lastOK = now, latency, ok
	changed = !ok || m.failures != 0
	if ok {
		m.failures = 0
	} else {
		m.failures++
	}
	if !ok && m.openSince.IsZero() && m.failures >= h.FailureThreshold {
		m.openSince = now
		m.open.Store(true)
		m.retryAt = now.Add(h.HealthInterval * time.Duration(h.RecoveryMultiplier))
		opened = true
	}
	m.mu.Unlock()
	return opened, changed
}

// resetCircuit closes the circuit and forgets failed checks, for a new
// child or one that passed its half-open check.
func (b *Backend) resetCircuit() {
	m := &b.mon
	m.mu.Lock()
	m.failures = 0
	m.openSince, m.retryAt = time.Time{}, time.Time{}
	m.open.Store(false)
	m.mu.Unlock()
}

// heardFrom marks that a call on the child got a response: traffic proves
// the child alive, so health checks are skipped meanwhile. It runs for
// every response, so it only stores a time.
func (b *Backend) heardFrom() { b.mon.heard.Store(time.Now().UnixNano()) }

// sinceHeard returns how long ago the child last answered a call.
func (b *Backend) sinceHeard() time.Duration {
	return time.Since(time.Unix(0, b.mon.heard.Load()))
}

// changes returns a channel closed at the next change of the backend.
func (b *Backend) changes() <-chan struct{} {
	m := &b.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.wake == nil {
		m.wake = make(chan struct{})
	}
	return m.wake
}

// wakeWaiters wakes whoever waits in changes.
func (b *Backend) wakeWaiters() {
	m := &b.mon
	m.mu.Lock()
	if m.wake != nil {
		close(m.wake)
		m.wake = nil
	}
	m.mu.Unlock()
}

// RefusedError is a call the backend refused without sending it to the
// child: its circuit is open, it did not come up within start_wait, or a
// limit was reached.
type RefusedError struct {
	Backend    string
	State      State
	RetryAfter time.Duration // when a retry can succeed; 0 when unknown
	Busy       bool          // refused by max_concurrent_calls or rate_limit
	Msg        string
}

func (e *RefusedError) Error() string { return e.Msg }

// circuitError is the error of a call made while the circuit is open.
func (b *Backend) circuitError(retryAt time.Time) *RefusedError {
	wait := max(time.Until(retryAt), 0)
	return &RefusedError{
		Backend: b.name, State: Unhealthy, RetryAfter: wait,
		Msg: fmt.Sprintf("backend %q is unhealthy: it failed %d health checks in a row, so its circuit is open; it is checked again in %s",
			b.name, b.cfg.FailureThreshold, wait.Round(time.Millisecond)),
	}
}
