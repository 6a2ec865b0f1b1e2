package unitrun

import (
	"strings"
	"testing"
)

// TestClaims: a backend claims its own unit and, as a pool, its
// instances' (also when their names are shortened), and nobody else's.
func TestClaims(t *testing.T) {
	long := strings.Repeat("github-enterprise-", 2)
	for _, tc := range []struct {
		name   string
		pooled bool
		unit   string
		want   bool
	}{
		{"files", false, UnitName("files", 0), true},
		{"files", false, UnitName("files2", 0), false},
		{"files", false, UnitName("files", 1), false}, // not a pool
		{"files", true, UnitName("files", 1), true},
		{"files", true, UnitName("files", 12), true},
		{"files", true, UnitName("files-x", 0), false},
		{"files", true, UnitName("other", 1), false},
		{long, false, UnitName(long, 0), true},
		{long, true, UnitName(long, 3), true},
		{long, true, UnitName("github", 3), false},
		{strings.Repeat("a", 22), true, UnitName(strings.Repeat("a", 22), 10), true}, // NAME-10 is shortened
		{"files", false, "mcpgate.service", false},
	} {
		if got := Claims(tc.name, tc.pooled, tc.unit); got != tc.want {
			t.Errorf("Claims(%q, pooled %v, %q) = %v, want %v", tc.name, tc.pooled, tc.unit, got, tc.want)
		}
	}
}
