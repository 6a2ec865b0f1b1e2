package backend

import (
	"fmt"
)

// A server of both eras over stdio (EraDual) cannot serve both on one
// connection: its first message picks the connection's era (the Go SDK and
// the TypeScript SDK v2 alike), and the server/discover probe has picked
// 2026-07-28. So the probed process stays, as the companion that serves
// the requests of 2026-07-28 clients (Conn.ForModern), and a second
// process of the same command is initialized for everything else: the
// backend's connection, its lists, health checks, 2025 sessions. The two
// are one backend: the companion ends when its connection ends, and its
// connection is aborted (and the pair restarted as after a crash) when
// the companion ends on its own.

// ForModern returns the connection that serves 2026-07-28 clients'
// requests: the companion of a dual stdio server while it runs, else c.
func (c *Conn) ForModern() *Conn {
	if m := c.companion.Load(); m != nil && !m.ended() {
		return m
	}
	return c
}

// secondChild keeps probed, a stdio child that answered server/discover as
// a dual server, as the companion of a new child it starts for initialize.
// A unit runner runs one process per backend: there the probed child is
// stopped, and the new one alone is the backend, a legacy one.
func (s *supervision) secondChild(probed *Conn) (*Conn, error) {
	b := s.b
	if b.cfg.UnitRunner() {
		b.log.Info(fmt.Sprintf("backend %q speaks 2026-07-28 and %s; over stdio a process has one era, and runner = \"unit\" runs one: it is started again and initialized", b.name, ProtocolVersion), probed.ident())
		s.stopConnKeeping(probed, "it answered server/discover; started again for initialize", true)
		return b.connect()
	}
	b.log.Info(fmt.Sprintf("backend %q speaks 2026-07-28 and %s; over stdio a process has one era: this one serves 2026-07-28 clients, and a second one is started and initialized", b.name, ProtocolVersion), probed.ident())
	conn, err := b.connect()
	if err != nil {
		probed.reason.Store(ptr("the second process of its server did not start"))
		probed.shutdown(b.opts.GracePeriod)
		return nil, err
	}
	probed.owner.Store(conn)
	conn.companion.Store(probed)
	if conn.ended() { // its reaper may have run before the companion was set
		probed.shutdown(b.opts.GracePeriod)
	}
	return conn, nil
}

// endPair runs when c's child has exited: a connection's companion is
// stopped, and a companion that ended on its own aborts its connection.
func (c *Conn) endPair() {
	if m := c.companion.Load(); m != nil {
		m.reason.Store(ptr("the initialized process of its server ended"))
		m.shutdown(c.b.opts.GracePeriod)
	}
	if o := c.owner.Load(); o != nil && !o.ended() {
		why := "its process serving 2026-07-28 clients ended: " + c.exit.Text
		o.log.Warn(fmt.Sprintf("backend %q: %s; both are started again", c.b.name, why), "companion_pid", c.PID())
		o.reason.Store(ptr(why))
		o.abort()
	}
}

// busy reports whether a companion has calls in flight.
func (c *Conn) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > 0
}
