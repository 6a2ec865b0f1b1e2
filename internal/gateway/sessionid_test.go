package gateway

import (
	"encoding/hex"
	"testing"
)

// Session ids are 128 random bits: hosts behind one balancer mint them
// independently and never collide, and a restarted host, whose session
// table starts empty, cannot accept an id of an earlier run.
func TestSessionIDsAre128RandomBits(t *testing.T) {
	const n = 100000
	seen := make(map[string]bool, n)
	for range n {
		id := newID()
		if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("session id %q: want 32 hex digits (128 bits)", id)
		}
		if seen[id] {
			t.Fatalf("session id %q minted twice in %d", id, n)
		}
		seen[id] = true
	}
}
