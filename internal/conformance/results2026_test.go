package conformance

import (
	"slices"
	"testing"
)

// checkRegressions compares check by check; it runs without the suite.
func TestCheckRegressions(t *testing.T) {
	sc := func(name string, statuses ...string) scenarioResult {
		r := scenarioResult{Name: name}
		for i, s := range statuses {
			r.Checks = append(r.Checks, check{ID: []string{"a", "b", "a"}[i], Status: s, ErrorMessage: "why"})
		}
		return r
	}
	base := &suiteRun{Target: "direct", Scenarios: []scenarioResult{
		sc("s1", statusSuccess, statusSuccess),
		sc("s2", statusSuccess, statusFailure),
		sc("s3", statusSuccess, statusSuccess, statusSuccess),
		sc("s4", statusSuccess),
		sc("exempt", statusSuccess),
		sc("s5", statusSuccess, statusSuccess),
	}}
	other := &suiteRun{Target: "gateway", Scenarios: []scenarioResult{
		sc("s1", statusSuccess, statusInfo),                   // b not exercised: a note
		sc("s2", statusSuccess, statusSuccess),                // better than base
		sc("s3", statusSuccess, statusSuccess, statusWarning), // second a lost
		sc("exempt", statusFailure),
		sc("s5", statusSuccess, statusFailure), // b exempt on its own
	}}
	lost, notes := checkRegressions(base, other, map[string]string{"exempt": "a reason", "s5/b": "a reason"})
	wantLost := []string{
		"s3/a passes direct but not gateway: WARNING: why",
		"s4/a passes direct but not gateway: the scenario did not run",
	}
	wantNotes := []string{"s1/b passes direct but not gateway: INFO: why"}
	if !slices.Equal(lost, wantLost) {
		t.Errorf("lost = %q, want %q", lost, wantLost)
	}
	if !slices.Equal(notes, wantNotes) {
		t.Errorf("notes = %q, want %q", notes, wantNotes)
	}
}
