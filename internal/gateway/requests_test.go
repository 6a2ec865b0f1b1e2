package gateway

import (
	"sync"
	"testing"
)

// Requests added and removed at once from many goroutines: each sees
// exactly those still in the set.
func TestRequestSet(t *testing.T) {
	var r requestSet
	const n = 1000
	sessions := make([]*Session, n)
	var wg sync.WaitGroup
	for i := range sessions {
		sessions[i] = &Session{one: &oneRequest{}}
		wg.Go(func() {
			r.add(sessions[i])
			if i%2 == 0 {
				r.remove(sessions[i])
			}
		})
	}
	wg.Wait()
	seen := map[*Session]bool{}
	r.each(func(s *Session) {
		if seen[s] {
			t.Errorf("session seen twice")
		}
		seen[s] = true
	})
	for i, s := range sessions {
		if seen[s] != (i%2 == 1) {
			t.Fatalf("session %d: in the set %v, want %v", i, seen[s], i%2 == 1)
		}
	}
	r.remove(sessions[1])
	r.remove(sessions[1]) // a second remove does nothing
	count := 0
	r.each(func(*Session) { count++ })
	if count != n/2-1 {
		t.Errorf("%d left, want %d", count, n/2-1)
	}
}
