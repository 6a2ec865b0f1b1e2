package testutil

import "testing"

// TestFreePortReserves checks what makes FreePort safe beside other tests:
// its ports lie outside the kernel's ephemeral range, which outgoing
// connections and port-0 listeners draw from, and a port stays reserved
// until the test that got it ends.
func TestFreePortReserves(t *testing.T) {
	lo, hi := reservablePorts()
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if p < lo || p >= hi {
			t.Fatalf("port %d lies outside %d-%d", p, lo, hi-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice while reserved", p)
		}
		seen[p] = true
	}
}
