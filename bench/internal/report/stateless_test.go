package report

import (
	"testing"

	"github.com/mcpgate/mcpgate/bench/internal/load"
)

// Each stateless run of mcpgate is compared with the session run beside it
// at the same number of clients, by CPU time per call.
func TestStatelessTargets(t *testing.T) {
	run := func(gateway string, clients int, cpu float64, skipped string) LoadRun {
		l := LoadRun{Scenario: "stateless", Backend: "benchecho", Gateway: gateway, Sessions: clients, Payload: 1024, CPUPerCall: cpu, Skipped: skipped}
		if skipped == "" {
			l.Result = &load.Result{Sessions: clients, Payload: 1024, Calls: 100, CallsPerSec: 1000}
		}
		return l
	}
	r := &Results{Load: []LoadRun{
		run("mcpgate", 1, 100, ""), run("mcpgate", 64, 50, ""), run("mcpgate", 16, 50, ""),
		run("mcpgate-stateless", 1, 105, ""), run("mcpgate-stateless", 64, 60, ""), run("mcpgate-stateless", 16, 0, "failed: HTTP 400"),
	}}
	want := []struct{ name, verdict string }{
		{"mcpgate CPU per call, stateless ÷ session (1 clients)", "1.05× (target ≤ 1.10×): met"},
		{"mcpgate CPU per call, stateless ÷ session (64 clients)", "1.20× (target ≤ 1.10×): MISSED"},
		{"mcpgate CPU per call, stateless ÷ session (16 clients)", "not measured: the stateless run failed: HTTP 400"},
	}
	got := r.statelessTargets()
	if len(got) != len(want) {
		t.Fatalf("%d targets, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Verdict() != w.verdict {
			t.Errorf("target %d = %q: %q, want %q: %q", i, got[i].Name, got[i].Verdict(), w.name, w.verdict)
		}
	}
}
