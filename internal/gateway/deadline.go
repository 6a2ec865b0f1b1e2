package gateway

import (
	"sync"
	"sync/atomic"
	"time"
)

// A session has one timer for the deadlines of all its calls in flight,
// instead of one per call: arming, stopping and allocating a timer was a
// microsecond of every call. The timer fires by the nearest deadline it
// was armed for; when it fires it times out the calls whose deadline
// passed and waits for the nearest of the others. A call that ends leaves
// it armed: it fires for nothing at most once per timeout, while a
// session calling back to back never touches it, since each new call's
// deadline comes after the one it is armed for.
//
// A stateless request's context lives for one request: a timer of its own
// would be made and stopped for every call, and would often be the only
// timer, which wakes the network poller to wait for it. The stateless
// requests in flight share one timer instead (Gateway.requestDeadlines),
// which fires by the nearest deadline any of them was armed for.

// armDeadline makes the session's deadline timer fire by at. It runs under
// s.mu.
func (s *Session) armDeadline(at time.Time) {
	if s.deadlineAt != 0 && s.deadlineAt <= at.UnixNano() {
		return // it fires before, and then waits for the calls still in flight
	}
	s.deadlineAt = at.UnixNano()
	if s.stateless {
		s.g.requestDeadlines.arm(s.deadlineAt, s.g.checkRequestDeadlines)
		return
	}
	if s.deadlines == nil {
		s.deadlines = time.AfterFunc(time.Until(at), s.checkDeadlines)
	} else {
		s.deadlines.Reset(time.Until(at))
	}
}

// checkDeadlines runs when the deadline timer fires: it times out every
// sent call whose deadline passed, and arms the timer for the nearest
// deadline of the others.
func (s *Session) checkDeadlines() {
	type expiry struct {
		c     *call
		why   string
		probe bool
	}
	var due []expiry
	now := time.Now()
	s.mu.Lock()
	s.deadlineAt = 0
	var next time.Time
	for _, c := range s.calls {
		if c.bcall == nil || c.ended.Load() {
			continue // not sent yet (or asking its client): armed once sent
		}
		why, probe, at := c.expired(now)
		switch {
		case why != "":
			due = append(due, expiry{c, why, probe})
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	if !next.IsZero() && !s.closed {
		s.armDeadline(next)
	}
	s.mu.Unlock()
	for _, e := range due {
		e.c.timedOut(e.why, e.probe)
	}
}

// sharedDeadline is a timer that fires by the nearest time it was armed
// for since it last fired.
type sharedDeadline struct {
	at    atomic.Int64 // unix ns it fires by; 0 when not armed
	mu    sync.Mutex   // held to change at and timer
	timer *time.Timer
}

// arm makes the timer run fire by at (unix ns). A time after the one it
// is armed for costs a load: no lock, no change to the timer.
func (d *sharedDeadline) arm(at int64, fire func()) {
	if cur := d.at.Load(); cur != 0 && cur <= at {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.at.Load(); cur != 0 && cur <= at {
		return
	}
	d.at.Store(at)
	wait := time.Until(time.Unix(0, at))
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, fire)
	} else {
		d.timer.Reset(wait)
	}
}

// fired disarms the timer, which fired: the next arm sets it again,
// unless it was stopped.
func (d *sharedDeadline) fired() {
	d.mu.Lock()
	if d.at.Load() > 0 {
		d.at.Store(0)
	}
	d.mu.Unlock()
}

// stop stops the timer for good.
func (d *sharedDeadline) stop() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.at.Store(-1) // before every time: never armed again
	d.mu.Unlock()
}

// checkRequestDeadlines runs when the stateless requests' timer fires:
// each request whose deadline passed times out its calls as a session's
// timer does (checkDeadlines, which arms the timer again for the next of
// its calls), and the timer is armed again for the others'.
func (g *Gateway) checkRequestDeadlines() {
	g.requestDeadlines.fired()
	now := time.Now().UnixNano()
	g.eachRequest(func(s *Session) {
		s.mu.Lock()
		at := s.deadlineAt
		s.mu.Unlock()
		switch {
		case at == 0:
		case at <= now:
			s.checkDeadlines()
		default:
			g.requestDeadlines.arm(at, g.checkRequestDeadlines)
		}
	})
}
