package gateway

import (
	"sync"
	"sync/atomic"
)

// requestShards is how many locks the stateless requests in flight are
// spread over.
const requestShards = 16

// requestSet holds the stateless requests in flight, for what must reach
// all of them (a catalog change, shutdown). Every stateless request joins
// and leaves it, so it is sharded: requests starting and ending at once
// rarely meet on a lock, and joining costs no allocation once a shard's
// map has grown (a sync.Map allocates for each new key).
type requestSet struct {
	next   atomic.Uint32
	shards [requestShards]struct {
		mu sync.Mutex
		m  map[*Session]struct{}
	}
}

// add puts s in the set, in the next shard in turn.
func (r *requestSet) add(s *Session) {
	s.one.shard = uint8(r.next.Add(1) % requestShards)
	sh := &r.shards[s.one.shard]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[*Session]struct{})
	}
	sh.m[s] = struct{}{}
	sh.mu.Unlock()
}

// remove takes s out of the set.
func (r *requestSet) remove(s *Session) {
	sh := &r.shards[s.one.shard]
	sh.mu.Lock()
	delete(sh.m, s)
	sh.mu.Unlock()
}

// each calls fn for every request in the set, outside the shards' locks.
func (r *requestSet) each(fn func(*Session)) {
	var in []*Session
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for s := range sh.m {
			in = append(in, s)
		}
		sh.mu.Unlock()
	}
	for _, s := range in {
		fn(s)
	}
}
