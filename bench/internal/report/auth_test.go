package report

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/bench/internal/load"
)

// The auth scenario's variants of mcpgate get rows of their own and the
// OAuth target.
func TestAuthTarget(t *testing.T) {
	r := results()
	if got := r.Targets()[len(r.Targets())-1].Verdict(); got != "not measured: no auth run" {
		t.Errorf("without an auth run: %q", got)
	}
	run := func(g string, cpu float64) LoadRun {
		return LoadRun{Scenario: "auth", Backend: "benchecho", Gateway: g, Sessions: 16, Payload: 1024, CPUPerCall: cpu,
			Result: &load.Result{Sessions: 16, Payload: 1024, Calls: 100, CallsPerSec: 1000}}
	}
	r.Load = append(r.Load, run("mcpgate", 100), run("mcpgate-token", 100), run("mcpgate-oauth", 105))
	ts := r.Targets()
	if got := ts[len(ts)-1]; got.Name != "mcpgate CPU per call with an OAuth JWT ÷ with a static token (16 sessions)" || got.Verdict() != "1.05× (target ≤ 1.10×): met" {
		t.Errorf("target %q: %q", got.Name, got.Verdict())
	}
	var names []string
	for _, row := range r.Rows() {
		if row.Scenario == "auth" {
			names = append(names, row.Run.Gateway)
		}
	}
	if strings.Join(names, ",") != "mcpgate,mcpgate-token,mcpgate-oauth" {
		t.Errorf("auth rows %q", names)
	}
}
