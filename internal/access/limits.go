package access

import (
	"strconv"
	"sync"
	"time"
)

// Bucket is a token bucket: up to burst requests at once, refilled at
// burst per interval. It is safe for concurrent use.
type Bucket struct {
	mu       sync.Mutex
	burst    float64
	perSec   float64
	tokens   float64
	last     time.Time
	interval time.Duration
}

// NewBucket returns a full bucket of burst tokens refilled over interval.
func NewBucket(burst int, interval time.Duration) *Bucket {
	return &Bucket{burst: float64(burst), perSec: float64(burst) / interval.Seconds(), tokens: float64(burst), interval: interval}
}

// Take takes one token. When none is left it returns false and how long
// until one is.
func (b *Bucket) Take(now time.Time) (ok bool, retryAfter time.Duration) {
	return b.TakeN(now, 1)
}

// TakeN takes n tokens, all or none (the messages of a batch). When fewer
// are left it returns false and how long until n are; n beyond the burst
// never succeeds.
func (b *Bucket) TakeN(now time.Time, n int) (ok bool, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.perSec)
	}
	b.last = now
	if b.tokens >= float64(n) {
		b.tokens -= float64(n)
		return true, 0
	}
	wait := time.Duration((float64(n) - b.tokens) / b.perSec * float64(time.Second))
	return false, max(wait, time.Millisecond)
}

// LimitError is a request refused by a client's max_sessions or
// rate_limit; the caller may try again after RetryAfter.
type LimitError struct {
	Client     string
	What       string // "rate_limit" or "max_sessions"
	Limit      string // the configured value
	RetryAfter time.Duration
}

// Error says which limit was reached and what to do.
func (e *LimitError) Error() string {
	if e.What == "max_sessions" {
		return "client \"" + e.Client + "\" has reached its max_sessions (" + e.Limit + "); end a session (HTTP DELETE) or wait for an idle one to expire"
	}
	return "client \"" + e.Client + "\" exceeded its rate_limit (" + e.Limit + "); retry after " + e.RetryAfter.Round(time.Second).String()
}

// String returns the bucket's rate as configured, such as "100/1m0s".
func (b *Bucket) String() string {
	return strconv.Itoa(int(b.burst)) + "/" + b.interval.String()
}
