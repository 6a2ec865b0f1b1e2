package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// limiter bounds a backend's calls: at most max in flight, further calls
// waiting in FIFO order for queueTimeout; and at most rate.Burst calls per
// rate.Interval, further calls refused at once.
type limiter struct {
	max          int // 0: unlimited
	queueTimeout time.Duration
	rate         config.RateLimit

	// unlimited calls take no lock: they only count in free.
	unlimited bool
	free      atomic.Int64

	mu       sync.Mutex
	inflight int
	queue    []chan struct{} // waiting calls, oldest first; closed when admitted
	tokens   float64         // token bucket of the rate limit
	refilled time.Time
}

func newLimiter(c config.Calls) *limiter {
	return &limiter{max: c.MaxConcurrentCalls, queueTimeout: c.QueueTimeout, rate: c.RateLimit, tokens: float64(c.RateLimit.Burst),
		unlimited: c.MaxConcurrentCalls == 0 && c.RateLimit.Burst == 0}
}

func (l *limiter) counts() (inflight, queued int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight + int(l.free.Load()), len(l.queue)
}

// allow takes a token of the rate limit; it returns how long until the
// next token when there is none.
func (l *limiter) allow(now time.Time) (ok bool, next time.Duration) {
	if l.rate.Burst == 0 {
		return true, 0
	}
	perToken := l.rate.Interval / time.Duration(l.rate.Burst)
	if !l.refilled.IsZero() {
		l.tokens = min(float64(l.rate.Burst), l.tokens+float64(now.Sub(l.refilled))/float64(perToken))
	}
	l.refilled = now
	if l.tokens >= 1 {
		l.tokens--
		return true, 0
	}
	return false, time.Duration((1 - l.tokens) * float64(perToken))
}

// acquire takes a slot for one call, waiting in line for up to queueTimeout
// if wait is set. The error names the limit.
func (l *limiter) acquire(ctx context.Context, wait bool, b *Backend) error {
	if l.unlimited {
		l.free.Add(1)
		return nil
	}
	l.mu.Lock()
	if ok, next := l.allow(time.Now()); !ok {
		l.mu.Unlock()
		return &RefusedError{Backend: b.name, State: b.State(), RetryAfter: next, Busy: true,
			Msg: fmt.Sprintf("backend %q: rate_limit %s reached; the next call is allowed in %s", b.name, l.rate, next.Round(time.Millisecond))}
	}
	if l.max == 0 || (l.inflight < l.max && len(l.queue) == 0) {
		l.inflight++
		l.mu.Unlock()
		return nil
	}
	if !wait {
		l.refund()
		l.mu.Unlock()
		return ErrWouldWait
	}
	turn := make(chan struct{})
	l.queue = append(l.queue, turn)
	l.mu.Unlock()
	b.callsChanged()

	timer := time.NewTimer(l.queueTimeout)
	defer timer.Stop()
	var why error
	select {
	case <-turn:
		b.callsChanged()
		return nil // release handed its slot over
	case <-timer.C:
	case <-ctx.Done():
		why = ctx.Err()
	}
	l.mu.Lock()
	for i, q := range l.queue {
		if q == turn {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			queued := len(l.queue) + 1
			l.mu.Unlock()
			b.callsChanged()
			if why != nil {
				return why
			}
			return &RefusedError{Backend: b.name, State: b.State(), Busy: true,
				Msg: fmt.Sprintf("backend %q: waited %s (queue_timeout) for one of its max_concurrent_calls = %d slots, with %d calls in line; raise max_concurrent_calls or queue_timeout, or call less at once",
					b.name, l.queueTimeout, l.max, queued)}
		}
	}
	l.mu.Unlock()
	// Admitted just as we gave up: keep the slot.
	return nil
}

// refund gives back the rate token of a call that did not go ahead; l.mu
// must be held.
func (l *limiter) refund() {
	if l.rate.Burst > 0 {
		l.tokens = min(float64(l.rate.Burst), l.tokens+1)
	}
}

// release frees a slot, handing it to the oldest waiting call if any.
func (l *limiter) release() {
	if l.unlimited {
		l.free.Add(-1)
		return
	}
	l.mu.Lock()
	if len(l.queue) > 0 {
		close(l.queue[0])
		l.queue = l.queue[1:]
	} else {
		l.inflight--
	}
	l.mu.Unlock()
}

// ErrWouldWait is Admit's answer, when told not to wait, for a call that
// has to wait for the backend to start or for a free slot.
var ErrWouldWait = errors.New("the call would have to wait")

// ErrNotRunning is Admit's answer for a backend that is stopped or failed.
var ErrNotRunning = errors.New("backend is not running")

// Admission is a call the backend accepted. Done must be called once when
// the call ends.
type Admission struct {
	Conn    *Conn
	b       *Backend
	started time.Time
	once    sync.Once
}

// Unlimited returns an admission of conn that its backend's limits did
// not count and its Done does not release: for requests that manage what
// an admitted call left running (MCP Tasks), which a backend at its
// max_concurrent_calls must still take.
func Unlimited(conn *Conn) *Admission { return &Admission{Conn: conn} }

// Done ends the admission; outcome is "ok" for a result, "error" for an
// error answer or a failed call.
func (a *Admission) Done(outcome string) {
	if a.b == nil {
		return // made by hand around a Conn (Unlimited): nothing to release
	}
	a.once.Do(func() {
		a.b.lim.release()
		if outcome != "ok" {
			a.b.mon.failed.Add(1)
		}
		a.b.callDone(outcome, time.Since(a.started))
		a.b.callsChanged()
	})
}

// Admit accepts a call for the backend, or says why not. It fails at once
// while the circuit is open (a *RefusedError), when the rate limit is
// reached (a *RefusedError), or when the backend is stopped or failed
// (ErrNotRunning). A starting backend is waited for up to start_wait, and
// a full max_concurrent_calls for up to queue_timeout; without wait, Admit
// returns ErrWouldWait instead of waiting, so the caller can wait on a
// goroutine of its own.
func (b *Backend) Admit(ctx context.Context, wait bool) (*Admission, error) {
	adm, err := b.admit(ctx, wait)
	if !errors.Is(err, ErrWouldWait) {
		b.mon.calls.Add(1)
	}
	if err != nil && !errors.Is(err, ErrWouldWait) {
		b.mon.failed.Add(1)
		b.callDone("refused", 0)
		b.callsChanged() // NCalls and NFailedCalls changed: announce them now
	}
	return adm, err
}

func (b *Backend) admit(ctx context.Context, wait bool) (*Admission, error) {
	if b.lc.pool != nil {
		return nil, fmt.Errorf("backend %q has an instance per session: calls go to the session's instance (Acquire)", b.name)
	}
	start := time.Now()
	if b.IsCLI() {
		return b.admitCLI(ctx, wait, start)
	}
	var deadline <-chan time.Time // armed at the first wait for a start
	var changes <-chan struct{}   // taken before the state is read again, once a call has to wait
	for {
		if wait && deadline != nil {
			changes = b.changes()
		}
		h := b.loadHot()
		state, conn := h.state, h.conn
		if open, retryAt := b.circuitOpen(); open {
			return nil, b.circuitError(retryAt)
		}
		if conn != nil && (state == Healthy || state == Unhealthy) && conn.ended() {
			// It died; the supervision is about to restart it. Its exit
			// counts, not the end of its pipes: a call admitted between the
			// two would fail with ErrGone instead of waiting (start_wait).
			state = Starting
		}
		switch state {
		case Healthy, Unhealthy:
			if err := b.lim.acquire(ctx, wait, b); err != nil {
				return nil, err
			}
			if conn = b.Conn(); conn == nil { // it died while the call waited in line
				b.lim.release()
				continue
			}
			b.callsChanged()
			return &Admission{Conn: conn, b: b, started: start}, nil
		case Stopped, Failed:
			return nil, ErrNotRunning
		}
		if !wait {
			return nil, ErrWouldWait
		}
		if deadline == nil {
			timer := time.NewTimer(b.cfg.StartWait)
			defer timer.Stop()
			deadline = timer.C
			continue // read the state again, now after taking changes
		}
		select {
		case <-changes:
		case <-deadline:
			return nil, &RefusedError{Backend: b.name, State: Starting,
				Msg: fmt.Sprintf("backend %q did not become healthy within start_wait (%s)%s", b.name, b.cfg.StartWait, lastError(b))}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func lastError(b *Backend) string {
	if e := b.Status().Cause; e != "" {
		return ": " + e
	}
	return ""
}

// callsChanged tells the observer that Health's call counts changed.
func (b *Backend) callsChanged() {
	if b.opts.OnCalls != nil {
		b.opts.OnCalls(b)
	}
}

// callDone tells the observer about a finished call.
func (b *Backend) callDone(outcome string, d time.Duration) {
	if b.opts.OnCall != nil {
		b.opts.OnCall(b, outcome, d)
	}
}

// admitCLI admits a call of a cli backend's tool. There is no server to
// check or restart, so no breaker and no start_wait; its call limits
// (max_concurrent_calls, queue_timeout, rate_limit) apply to each
// invocation. The Admission has no Conn.
func (b *Backend) admitCLI(ctx context.Context, wait bool, start time.Time) (*Admission, error) {
	if b.State() != Healthy {
		return nil, ErrNotRunning
	}
	if err := b.lim.acquire(ctx, wait, b); err != nil {
		return nil, err
	}
	b.callsChanged()
	return &Admission{b: b, started: start}, nil
}
