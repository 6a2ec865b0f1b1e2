package access

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

var jsonUnmarshal = json.Unmarshal

// tokenCache remembers validated tokens by their SHA-256, each until it
// expires, so that a session's every request does not pay for a signature
// check or an introspection. Lookups take no lock. It holds about size
// tokens at most: when full, it drops the expired ones, then, if that was
// not enough, any.
type tokenCache struct {
	size    int
	entries sync.Map // [32]byte → *cachedGrant
	n       atomic.Int64
	evict   sync.Mutex // one eviction sweep at a time
}

type cachedGrant struct {
	resource string
	grant    *Grant
}

func newTokenCache(size int) *tokenCache { return &tokenCache{size: size} }

// get returns the grant of the token hashing to key, if it was validated
// for resource and has not expired at now.
func (c *tokenCache) get(key [32]byte, resource string, now time.Time) *Grant {
	v, ok := c.entries.Load(key)
	if !ok {
		return nil
	}
	e := v.(*cachedGrant)
	if !now.Before(e.grant.Expiry) {
		if c.entries.CompareAndDelete(key, v) {
			c.n.Add(-1)
		}
		return nil
	}
	if e.resource != resource {
		return nil
	}
	return e.grant
}

// put remembers a validated token.
func (c *tokenCache) put(key [32]byte, resource string, g *Grant) {
	if c.size == 0 {
		return
	}
	if c.n.Load() >= int64(c.size) {
		c.sweep()
	}
	if _, loaded := c.entries.Swap(key, &cachedGrant{resource, g}); !loaded {
		c.n.Add(1)
	}
}

// sweep makes room: expired entries go first, then any until a tenth of
// the cache is free.
func (c *tokenCache) sweep() {
	if !c.evict.TryLock() {
		return
	}
	defer c.evict.Unlock()
	now := time.Now()
	keep := int64(c.size) * 9 / 10
	c.entries.Range(func(k, v any) bool {
		if !now.Before(v.(*cachedGrant).grant.Expiry) && c.entries.CompareAndDelete(k, v) {
			c.n.Add(-1)
		}
		return true
	})
	c.entries.Range(func(k, v any) bool {
		if c.n.Load() <= keep {
			return false
		}
		if c.entries.CompareAndDelete(k, v) {
			c.n.Add(-1)
		}
		return true
	})
}
