package gateway

import "time"

// A session has one timer for the deadlines of all its calls in flight,
// instead of one per call: arming, stopping and allocating a timer was a
// microsecond of every call. The timer fires by the nearest deadline it
// was armed for; when it fires it times out the calls whose deadline
// passed and waits for the nearest of the others. A call that ends leaves
// it armed: it fires for nothing at most once per timeout, while a
// session calling back to back never touches it, since each new call's
// deadline comes after the one it is armed for.

// armDeadline makes the session's deadline timer fire by at. It runs under
// s.mu.
func (s *Session) armDeadline(at time.Time) {
	if s.deadlineAt != 0 && s.deadlineAt <= at.UnixNano() {
		return // it fires before, and then waits for the calls still in flight
	}
	s.deadlineAt = at.UnixNano()
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
