package backend

import (
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// What a server writes can make the gateway warn (a message too large, an
// invalid line, a redirect it refused), and a hostile or broken server can
// write such things without end. Those warnings are rate-limited per
// backend, across its restarts, so that one server cannot fill journald's
// per-unit limit and have the entries that matter suppressed.
const (
	misbehavedWindow = time.Minute
	misbehavedPerKey = 10 // warnings of one kind per backend and window
	misbehavedTotal  = 30 // warnings of all kinds per backend and window
	misbehavedKinds  = 16 // kinds remembered at once
)

func newMisbehavedLimiter() *journal.Limiter {
	return journal.NewLimiter(misbehavedWindow, misbehavedPerKey, misbehavedTotal, misbehavedKinds)
}

// warnServer journals a warning about what the server sent, unless
// warnings of its kind are over their limit; the next one journaled says
// how many were counted instead (MCPGATE_SUPPRESSED).
func (c *Conn) warnServer(kind, msg string, attrs ...any) {
	log, suppressed, last := c.b.misbehaved.Allow(kind, time.Now())
	if !log {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	if last {
		attrs = append(attrs, "note", "further warnings of this kind within a minute are counted, not logged")
	}
	c.log.Warn(msg, attrs...)
}
