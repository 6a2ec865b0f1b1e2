package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// Allocation budget of checkDecided: refusing ambiguous members costs a
// tools/call one pass over params and no allocation.
func TestCheckDecidedAllocationBudget(t *testing.T) {
	params := json.RawMessage(`{"name":"fs__read_file","arguments":{"path":"/srv/data/` + strings.Repeat("x", 200) +
		`"},"_meta":{"progressToken":17}}`)
	const budget = 0
	got := testing.AllocsPerRun(100, func() {
		if err := checkDecided("tools/call", params, true); err != nil {
			t.Fatal(err)
		}
	})
	if got > budget {
		t.Errorf("checkDecided allocates %.1f times, over its budget of %d", got, budget)
	}
}
