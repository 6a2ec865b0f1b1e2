package sdnotify

import (
	"context"
	"sync"
	"time"
)

// StatusLimiter coalesces bursts of STATUS= updates: it sends at most one per
// interval, and the last status set is always sent. A status equal to the one
// last sent is not sent again. Set may be called from any goroutine; Run sends.
type StatusLimiter struct {
	notifier *Notifier
	interval time.Duration
	// after returns a channel that fires once the interval since the last send
	// has passed; time.After outside tests.
	after func(time.Duration) <-chan time.Time

	wake chan struct{} // capacity 1: "latest changed"

	mu      sync.Mutex
	latest  string
	version uint64 // counts Set calls, so Run knows whether anything is pending
}

// NewStatusLimiter returns a StatusLimiter that sends through n at most once
// per interval. Nothing is sent until Run is running.
func NewStatusLimiter(n *Notifier, interval time.Duration) *StatusLimiter {
	return &StatusLimiter{
		notifier: n,
		interval: interval,
		after:    time.After,
		wake:     make(chan struct{}, 1),
	}
}

// Set makes status the one to send next, replacing any not yet sent. It never
// blocks.
func (l *StatusLimiter) Set(status string) {
	l.mu.Lock()
	l.latest = status
	l.version++
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run sends the statuses given to Set until ctx is done: a status set after a
// quiet interval goes out at once, further ones wait until the interval since
// the last send has passed, and only the latest of them is sent. When ctx is
// done Run sends the pending status, if any, and returns. Run it once.
func (l *StatusLimiter) Run(ctx context.Context) {
	var sent string
	var sentAny bool
	var seen uint64 // version of the last status looked at
	deliver := func() bool {
		l.mu.Lock()
		status, version := l.latest, l.version
		l.mu.Unlock()
		if version == seen || (sentAny && status == sent) {
			seen = version
			return false
		}
		seen = version
		// A failure is the Notifier's to log; the next change tries again.
		l.notifier.Status(status)
		sent, sentAny = status, true
		return true
	}
	for {
		select {
		case <-ctx.Done():
			deliver()
			return
		case <-l.wake:
		}
		if !deliver() {
			continue
		}
		select {
		case <-ctx.Done():
			deliver()
			return
		case <-l.after(l.interval):
		}
	}
}
