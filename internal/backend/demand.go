package backend

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// lifecycle is what a backend keeps for starting on demand, stopping when
// idle and serving as a pool or as one of a pool's instances.
type lifecycle struct {
	cached atomic.Pointer[catalogCache] // the last handshake, for an idle backend's catalog
	pool   *pool                        // instance = "session": the entry's pool; nil otherwise
	parent *pool                        // the pool this backend is an instance of, or nil
	owner  atomic.Pointer[ownerBox]     // the session an instance is bound to
	server atomic.Pointer[ServerInfo]   // the last child's, for catalog_grace
}

type ownerBox struct{ v any }

// Catalog returns what the backend contributes to the gateway's catalog:
// the lists and server info of its running child (or of the pool's first
// instance), those of the last child while it restarts within
// catalog_grace, or, while an on-demand backend is idle or starting, those
// of its cached handshake. Both are nil when it contributes nothing.
func (b *Backend) Catalog() (*Lists, *ServerInfo) {
	st := b.Status()
	if b.IsCLI() {
		if st.State != Healthy {
			return nil, nil
		}
		return b.Lists(), cliServer()
	}
	switch st.State {
	case Healthy, Unhealthy:
		if st.Server != nil {
			b.lc.server.Store(st.Server)
			return b.Lists(), st.Server
		}
	case Starting:
		if server := b.lc.server.Load(); server != nil && b.Listed() {
			return b.Lists(), server
		}
	}
	if st.State == Idle || st.State == Starting {
		if c := b.lc.cached.Load(); c != nil {
			return c.lists, c.server
		}
	}
	return nil, nil
}

// Wake starts a backend that is idle (start = "on-demand", or stopped by
// idle_stop), without waiting: a call then waits for it in Admit, up to
// start_wait. An on-demand backend still starting (to fill its catalog
// cache, perhaps) is told a call wants it, so that it keeps running once
// started. A backend in any other state is left alone; one stopped by
// the operator stays stopped.
func (b *Backend) Wake() {
	switch b.State() {
	case Idle:
	case Starting:
		if !b.cfg.OnDemand() {
			return
		}
	default:
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StartWait)
		defer cancel()
		b.command(ctx, opDemand) // the outcome shows in the state Admit waits on
	}()
}

// keepsCache reports whether the backend remembers its catalog on disk.
func (b *Backend) keepsCache() bool { return b.opts.CatalogCache != "" }

// loadCache reads the catalog cache of an on-demand backend and reports
// whether it has one. A cache that cannot be read is reported and ignored:
// the backend then starts once to write a new one.
func (b *Backend) loadCache() bool {
	if !b.keepsCache() {
		return false
	}
	c, err := readCache(b.opts.CatalogCache)
	if err != nil {
		b.log.Warn(fmt.Sprintf("backend %q: ignoring the catalog cache %s: %v; the backend starts once to write a new one", b.name, b.opts.CatalogCache, err),
			"cache", b.opts.CatalogCache)
		return false
	}
	if c == nil {
		return false
	}
	b.lc.cached.Store(c)
	return true
}

// saveCache remembers the catalog of a successful handshake or refresh.
func (b *Backend) saveCache(server *ServerInfo, lists *Lists) {
	if !b.keepsCache() || server == nil {
		return
	}
	c := &catalogCache{server: server, lists: lists}
	b.lc.cached.Store(c)
	if err := writeCache(b.opts.CatalogCache, c); err != nil {
		b.log.Warn(fmt.Sprintf("backend %q: cannot write the catalog cache: %v; its catalog is still served from memory", b.name, err), "cache", b.opts.CatalogCache, "err", err)
	}
}

// startIdle decides how an on-demand backend begins: idle with its cached
// catalog, or (reported by fill) started once to fill the cache.
func (s *supervision) startIdle() {
	b := s.b
	if !s.want || !b.cfg.OnDemand() {
		return
	}
	s.want = !b.loadCache()
	s.fill = s.want
	if !s.want {
		b.setState(Idle, func(st *Status) { st.LastError = "" })
	}
	b.settle() // readiness never waits for an on-demand backend
}

// afterStart stops the child again when it was started only to fill the
// catalog cache, and reports whether it did.
func (s *supervision) afterStart(conn *Conn) bool {
	fill := s.fill && !s.demanded
	s.fill, s.demanded = false, false
	if !fill {
		return false
	}
	s.goIdle(conn, "its catalog is cached; it starts again on its first call (start = \"on-demand\")")
	return true
}

// goIdle stops the child and leaves the backend idle, to start on demand.
func (s *supervision) goIdle(conn *Conn, why string) {
	s.stopConnKeeping(conn, why, true)
	s.want = false
	s.b.setState(Idle, func(st *Status) { st.Retrying = false })
	s.b.lists.Store(&Lists{}) // idle, the catalog is the cache's
}

// idleTicker returns the ticker that checks idle_stop, or nil.
func (s *supervision) idleTicker() (*time.Ticker, <-chan time.Time) {
	d := s.b.cfg.IdleStop
	if d <= 0 {
		return nil, nil
	}
	t := time.NewTicker(max(d/4, 10*time.Millisecond))
	return t, t.C
}

// idleFor returns how long conn has had no call in flight, and the
// gateway no subscription on the backend; 0 while it is in use.
func (b *Backend) idleFor(conn *Conn, now time.Time) time.Duration {
	conn.mu.Lock()
	n := len(conn.pending)
	if _, ok := conn.pending[conn.listenID.Load()]; ok {
		n-- // our own subscription to list changes is no call
	}
	busy := n > 0
	conn.mu.Unlock()
	if busy || (b.opts.InUse != nil && b.opts.InUse(b)) {
		conn.touch()
		return 0
	}
	return now.Sub(time.Unix(0, conn.lastActive.Load()))
}

// checkIdle stops the child when it has been idle for idle_stop, and
// reports whether it did.
func (s *supervision) checkIdle(conn *Conn) bool {
	idle := s.b.cfg.IdleStop
	if s.b.idleFor(conn, time.Now()) < idle {
		return false
	}
	s.b.log.Info(fmt.Sprintf("stopping backend %q: no call and no subscription for %s (idle_stop); it starts again on its next call", s.b.name, idle))
	s.goIdle(conn, fmt.Sprintf("idle for %s (idle_stop)", idle))
	return true
}

// touch records activity on the connection, for idle_stop.
func (c *Conn) touch() { c.touchAt(time.Now().UnixNano()) }

// touchAt is touch at now, in Unix nanoseconds.
func (c *Conn) touchAt(now int64) { c.lastActive.Store(now) }
