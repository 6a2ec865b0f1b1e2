package conformance

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// These tests cover the harness's own bookkeeping and run without the suite.

func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	write := func(sub, checks string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if checks != "" {
			if err := os.WriteFile(filepath.Join(dir, sub, "checks.json"), []byte(checks), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("server-ping-2026-01-02T03-04-05-678Z", `[{"id":"ping","status":"SUCCESS"}]`)
	write("server-tools-call-sampling-2026-01-02T03-04-05-679Z",
		`[{"id":"tools-call-sampling","status":"FAILURE","errorMessage":"no sampling"}]`)
	write("server-server-sse-polling-2026-01-02T03-04-05-680Z",
		`[{"id":"outgoing-request","status":"INFO"},{"id":"server-sse-retry-field","status":"WARNING"}]`)
	write("server-crashed-2026-01-02T03-04-05-681Z", "") // suite writes no checks.json when a scenario throws
	output := "Running active suite (5 scenarios)\n" +
		"\n=== Running scenario: ping ===\n" +
		"\n=== Running scenario: tools-call-sampling ===\n" +
		"\n=== Running scenario: server-sse-polling ===\n" +
		"\n=== Running scenario: crashed ===\n" +
		"\n=== Running scenario: never-finished ===\n"

	got, err := readResults(output, dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		passed  bool
		verdict string
	}{
		{"ping", true, "pass"},
		{"tools-call-sampling", false, "FAIL"},
		{"server-sse-polling", true, "pass (warn)"},
		{"crashed", false, "FAIL"},
		{"never-finished", false, "FAIL"},
	}
	if len(got) != len(tests) {
		t.Fatalf("readResults returned %d scenarios, want %d: %+v", len(got), len(tests), got)
	}
	for i, tt := range tests {
		r := got[i]
		if r.Name != tt.name || r.passed() != tt.passed || r.verdict() != tt.verdict {
			t.Errorf("scenario %d = %s passed=%v verdict=%q, want %s passed=%v verdict=%q",
				i, r.Name, r.passed(), r.verdict(), tt.name, tt.passed, tt.verdict)
		}
	}
	run := &suiteRun{Target: "direct", Scenarios: got}
	if s := run.summary(); s != "direct: 2/5 scenarios pass" {
		t.Errorf("summary = %q", s)
	}
}

func TestReadResultsNoScenario(t *testing.T) {
	if _, err := readResults("Server test error: boom\n", t.TempDir()); err == nil {
		t.Error("readResults accepted suite output that announces no scenario")
	}
}

func TestRegressions(t *testing.T) {
	pass := func(name string) scenarioResult {
		return scenarioResult{Name: name, Checks: []check{{Status: statusSuccess}}}
	}
	warn := func(name string) scenarioResult {
		return scenarioResult{Name: name, Checks: []check{{Status: statusSuccess}, {Status: statusWarning}}}
	}
	fail := func(name string) scenarioResult {
		return scenarioResult{Name: name, Checks: []check{{Status: statusFailure}}}
	}
	tests := []struct {
		name    string
		direct  []scenarioResult
		gateway []scenarioResult
		want    []string
	}{
		{
			name:    "all pass",
			direct:  []scenarioResult{pass("a"), pass("b")},
			gateway: []scenarioResult{pass("a"), pass("b")},
		},
		{
			name:    "failing directly may fail through the gateway",
			direct:  []scenarioResult{pass("a"), fail("b")},
			gateway: []scenarioResult{pass("a"), fail("b")},
		},
		{
			name:    "warnings do not fail",
			direct:  []scenarioResult{pass("a")},
			gateway: []scenarioResult{warn("a")},
		},
		{
			name:    "regression",
			direct:  []scenarioResult{pass("a"), pass("b")},
			gateway: []scenarioResult{pass("a"), fail("b")},
			want:    []string{"b passes direct but fails gateway"},
		},
		{
			name:    "missing through the gateway",
			direct:  []scenarioResult{pass("a"), pass("b")},
			gateway: []scenarioResult{pass("a")},
			want:    []string{"b passes direct but did not run gateway"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := regressions(&suiteRun{Target: "direct", Scenarios: tt.direct},
				&suiteRun{Target: "gateway", Scenarios: tt.gateway})
			if !slices.Equal(got, tt.want) {
				t.Errorf("regressions = %q, want %q", got, tt.want)
			}
		})
	}
}
