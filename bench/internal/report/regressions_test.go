package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// A load run whose CPU per call rose by more than the threshold since the
// previous run is reported, with the floor's change beside it; runs that
// did not, or that the previous run lacks, are not.
func TestRegressions(t *testing.T) {
	prev, cur := results(), results()
	set := func(r *Results, g string, sessions int, cpu float64) {
		r.Find("sessions", g, sessions, 1024).CPUPerCall = cpu
	}
	for _, r := range []*Results{prev, cur} {
		set(r, "floor", 1, 30)
		set(r, "floor", 64, 30)
		set(r, "peer", 1, 300)
	}
	set(prev, "mcpgate", 1, 40)
	set(cur, "mcpgate", 1, 41) // +2.5%: within the threshold
	set(prev, "mcpgate", 64, 40)
	set(cur, "mcpgate", 64, 46) // +15%
	cur.Load = append(cur.Load, LoadRun{Scenario: "shared", Backend: "benchecho", Gateway: "mcpgate-shared", Sessions: 1, Payload: 1024, CPUPerCall: 99})
	regs := Regressions(prev, cur, 0.05)
	if len(regs) != 1 || regs[0].Gateway != "mcpgate" || regs[0].Sessions != 64 || regs[0].Floor != 1 {
		t.Fatalf("Regressions = %+v; want mcpgate at 64 sessions only, the floor unchanged", regs)
	}
	var out bytes.Buffer
	PrintRegressions(&out, "prev.json", prev, cur, 0.05)
	if !strings.Contains(out.String(), "+15%") || !strings.Contains(out.String(), "1 load runs") {
		t.Errorf("table:\n%s", out.String())
	}
}

// Previous finds the newest whole run, skipping partial, quick and baseline
// runs.
func TestPrevious(t *testing.T) {
	dir := t.TempDir()
	write := func(name, date string, quick bool) {
		r := results()
		r.Date, r.Quick = date, quick
		if strings.HasSuffix(name, "-ab.json") {
			r.Baseline = "bin/baseline/mcpgated"
		}
		if err := r.Write(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("2026-11-23-vm.json", "2026-11-23T10:00:00Z", false)
	write("2026-11-24-vm.json", "2026-11-24T10:00:00Z", false)
	write("2026-11-25-vm-partial.json", "2026-11-25T10:00:00Z", false)
	write("2026-11-26-vm-quick.json", "2026-11-26T10:00:00Z", true)
	write("2026-11-27-vm-ab.json", "2026-11-27T10:00:00Z", false)
	path, _, err := Previous(dir, "")
	if err != nil || filepath.Base(path) != "2026-11-24-vm.json" {
		t.Errorf("Previous = %s, %v; want 2026-11-24-vm.json", path, err)
	}
}
