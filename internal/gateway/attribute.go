package gateway

import (
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// A backend's own message does not say which of the calls in flight on
// its connection it belongs to. This file is how the gateway decides,
// never guessing between two clients: a notification goes to the one
// session with calls there, a request (sampling, elicitation, roots, ping)
// to the one call that can have sent it.

// attribute finds the one session with calls in flight on conn, and the
// stream of its most recent call there. It returns nil when no session or
// several sessions have calls in flight: a backend's own message does not
// say which request it belongs to. A dedicated instance's messages belong
// to its session, with or without a call in flight.
func attribute(conn *backend.Conn) (*Session, *Stream) {
	s, via := attributeByCalls(conn)
	if owner := ownerSession(conn); owner != nil && s != owner {
		return owner, nil
	}
	return s, via
}

func attributeByCalls(conn *backend.Conn) (*Session, *Stream) {
	var sess *Session
	var latest *call
	var latestID int64
	ambiguous := false
	conn.Calls(func(bc *backend.Call) {
		c, ok := bc.Owner.(*call)
		if !ok {
			return
		}
		switch {
		case sess == nil:
			sess = c.sess
		case sess != c.sess:
			ambiguous = true
		}
		if bc.ID > latestID {
			latest, latestID = c, bc.ID
		}
	})
	if sess == nil || ambiguous {
		return nil, nil
	}
	return sess, latest.stream
}

// askSettle is how long after a backend's request was attributed to a
// call that call may still send the next one at once: a server that asks
// several questions together (Promise.all, a burst of writes) sends them
// within it. Once it has passed, a call whose requests all wait for their
// client's answer can be sending none: a server awaits an answer before it
// asks the next question of the same call.
const askSettle = 20 * time.Millisecond

// asked records that a request of the backend was attributed to the call
// and waits for its client's answer.
func (c *call) asked() {
	if c == nil {
		return
	}
	c.askedAt.Store(time.Now().UnixNano())
	c.asking.Add(1)
}

// answered records that one of the call's requests no longer waits: its
// client answered it, or it was refused, cancelled or timed out. It runs
// before the backend can read the answer.
func (c *call) answered() {
	if c != nil {
		c.asking.Add(-1)
	}
}

// waiting reports whether every request the backend sent for the call
// waits for its client's answer, the last one for longer than askSettle:
// the backend awaits the client on that call, and what it asks next is
// another call's.
func (c *call) waiting(now time.Time) bool {
	return c.asking.Load() > 0 && now.UnixNano()-c.askedAt.Load() > int64(askSettle)
}

// attributeRequest returns the session a request that the backend on conn
// sent to its client belongs to, and the call it was sent for: of the
// calls in flight there, those not waiting for their client's answer (see
// waiting) must all be one session's (or one stateless request's), and
// the most recent of them is the call; when every call waits, they must
// all be one session's. A dedicated instance's requests are its
// session's, with its most recent call, or none (c nil). It returns a nil
// session, and n, the sessions that could have sent the request, when
// there is no call or more than one session could: one client's request
// is never shown to another. So a call that waits for its client (a
// person slow to answer, a stateless client that never retries) keeps no
// other client's questions from reaching that client.
func attributeRequest(conn *backend.Conn, now time.Time) (s *Session, c *call, n int) {
	owner := ownerSession(conn)
	var free, all attribution
	conn.Calls(func(bc *backend.Call) {
		c, ok := bc.Owner.(*call)
		if !ok || owner != nil && c.sess != owner {
			return
		}
		all.add(c, bc.ID)
		if !c.waiting(now) {
			free.add(c, bc.ID)
		}
	})
	switch {
	case free.latest != nil && !free.ambiguous:
		return free.latest.sess, free.latest, 1
	case free.latest == nil && all.latest != nil && !all.ambiguous:
		return all.latest.sess, all.latest, 1
	case owner != nil:
		return owner, nil, 1
	case free.ambiguous:
		return nil, nil, free.sessions()
	}
	return nil, nil, all.sessions()
}

// attribution gathers calls of a connection, for attributeRequest.
type attribution struct {
	latest    *call
	latestID  int64
	ambiguous bool // calls of more than one session
	seen      map[*Session]bool
}

func (a *attribution) add(c *call, id int64) {
	switch {
	case a.latest == nil:
	case a.latest.sess != c.sess:
		a.ambiguous = true
		if a.seen == nil {
			a.seen = map[*Session]bool{a.latest.sess: true}
		}
	}
	if a.seen != nil {
		a.seen[c.sess] = true
	}
	if a.latest == nil || id > a.latestID {
		a.latest, a.latestID = c, id
	}
}

// sessions counts the sessions of the calls gathered.
func (a *attribution) sessions() int {
	switch {
	case a.latest == nil:
		return 0
	case a.seen == nil:
		return 1
	}
	return len(a.seen)
}
