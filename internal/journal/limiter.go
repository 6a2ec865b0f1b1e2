package journal

import (
	"sync"
	"time"
)

// Limiter decides which entries of a flood are journaled, so that whoever
// can cause an entry (a local user connecting to a socket) cannot fill
// journald's per-unit rate limit and have the entries that matter
// suppressed. Per key (a peer) and window, the first PerKey entries are
// journaled; within the same window at most Total entries are journaled
// over all keys. The rest are counted, and the count is reported with the
// next entry of that key that is journaled.
type Limiter struct {
	window        time.Duration
	perKey, total int

	mu      sync.Mutex
	since   time.Time // start of the current window of all keys
	logged  int       // entries journaled in it, over all keys
	keys    map[string]*limited
	maxKeys int
}

type limited struct {
	since      time.Time // start of the key's window
	count      int       // entries of the key in its window
	suppressed int       // entries of the key not journaled since its last one
}

// NewLimiter returns a Limiter journaling, per window, perKey entries of
// each key and total entries in all; it remembers at most maxKeys keys at
// once (beyond that, ended windows are forgotten first, then all).
func NewLimiter(window time.Duration, perKey, total, maxKeys int) *Limiter {
	return &Limiter{window: window, perKey: perKey, total: total, maxKeys: maxKeys, keys: map[string]*limited{}}
}

// Allow reports whether an entry of key, at now, is to be journaled, and
// if so how many of the key's entries were suppressed since its last one
// journaled. last is true for the key's last entry journaled in its
// window, which may say that the rest are counted.
func (l *Limiter) Allow(key string, now time.Time) (log bool, suppressed int, last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.since) > l.window {
		l.since, l.logged = now, 0
	}
	k := l.keys[key]
	switch {
	case k == nil:
		if len(l.keys) >= l.maxKeys {
			l.forget(now)
		}
		k = &limited{since: now}
		l.keys[key] = k
	case now.Sub(k.since) > l.window:
		k.since, k.count = now, 0
	}
	k.count++
	if k.count > l.perKey || l.logged >= l.total {
		k.suppressed++
		return false, 0, false
	}
	l.logged++
	suppressed, k.suppressed = k.suppressed, 0
	return true, suppressed, k.count == l.perKey || l.logged == l.total
}

// forget drops the keys whose window ended; if none did, all of them.
func (l *Limiter) forget(now time.Time) {
	for key, k := range l.keys {
		if now.Sub(k.since) > l.window {
			delete(l.keys, key)
		}
	}
	if len(l.keys) >= l.maxKeys {
		clear(l.keys)
	}
}
