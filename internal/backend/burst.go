package backend

import (
	"sync"
	"sync/atomic"
)

// burst holds what is to run once a connection has handled every message
// the server sent in one go (see AfterBurst).
type burst struct {
	mu  sync.Mutex
	fns []func()
	set atomic.Bool // fns is not empty: the reader's cheap check
}

// AfterBurst has fn run once the connection has handled every message the
// server sent together: every complete line a child wrote that mcpgated
// has read, or a remote server's message or batch. A backend that sends
// several requests back to back (sampling, elicitation and roots for one
// call) is so seen whole before anyone acts on the first. It is meant to
// be called while a message of the connection is handled (a Handler's
// Request or Notification); fn runs on the connection's reader, after
// that handling returned, and must not block.
func (c *Conn) AfterBurst(fn func()) {
	c.burst.mu.Lock()
	c.burst.fns = append(c.burst.fns, fn)
	c.burst.set.Store(true)
	c.burst.mu.Unlock()
}

// endBurst runs what AfterBurst queued, including what that queues.
func (c *Conn) endBurst() {
	for {
		c.burst.mu.Lock()
		fns := c.burst.fns
		c.burst.fns = nil
		c.burst.set.Store(false)
		c.burst.mu.Unlock()
		if len(fns) == 0 {
			return
		}
		for _, fn := range fns {
			fn()
		}
	}
}

// burstPending reports whether AfterBurst queued something.
func (c *Conn) burstPending() bool { return c.burst.set.Load() }
