package backend

import (
	"math"
	"testing"
)

// TestMemoryWatch: one warning when use passes 80% of memory_max, another
// only after it fell below; unknown use never warns.
func TestMemoryWatch(t *testing.T) {
	m := &memoryWatch{limit: 1000}
	for i, step := range []struct {
		current uint64
		warn    bool
	}{
		{500, false}, {800, false}, {801, true}, {900, false}, {math.MaxUint64, false}, {700, false}, {950, true},
	} {
		if got := m.observe(step.current); got != step.warn {
			t.Errorf("step %d: observe(%d) = %v, want %v", i, step.current, got, step.warn)
		}
	}
}
