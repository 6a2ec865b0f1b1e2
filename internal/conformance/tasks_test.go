package conformance

import (
	"os"
	"sync"
	"testing"
)

// taskScenarios are the server scenarios of the suite's tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663), which no requirement set
// scores: each runs on its own (--scenario). tasks-status-notifications
// is left out: the suite skips its only check ("the harness needs a
// rewrite against the new channel").
var taskScenarios = []string{
	"tasks-lifecycle",
	"tasks-capability-negotiation",
	"tasks-wire-fields",
	"tasks-request-state-removal",
	"tasks-mrtr-input",
	"tasks-request-headers",
	"tasks-dispatch-and-envelope",
	"tasks-required-task-error",
	"tasks-mrtr-composition",
}

// TestConformanceTasks runs the suite's task scenarios against
// everything-server-2026, whose tasks-2026.mjs implements the extension:
// directly over HTTP, the baseline, where every one must pass; and
// through mcpgate, with the fixture as a remote (HTTP) and as a stdio
// backend, where every check that passes directly must pass. The three
// runs go side by side: the scenarios mostly wait for tasks to finish.
//
// The fixture's 2025-only mode (--stdio-2025) has no leg: a task of a
// 2025 server is created only for a 2025 session's task-augmented call,
// and mcpgated does not turn the 2026 extension into 2025 tasks (see
// TASKS in mcpgated(8)).
//
// It runs only with MCPGATE_CONFORMANCE=1; `make conformance` sets it.
func TestConformanceTasks(t *testing.T) {
	if os.Getenv("MCPGATE_CONFORMANCE") != "1" {
		t.Skip("MCP conformance suite not requested: set MCPGATE_CONFORMANCE=1 (make conformance does)")
	}
	tk := installTools(t)
	fixture := fixture2026(t)
	targets := []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"direct", func(t *testing.T) string { return startFixture2026HTTP(t, tk.node, fixture) }},
		{"remote 2026 backend", func(t *testing.T) string {
			return startRemoteGateway(t, startFixture2026HTTP(t, tk.node, fixture))
		}},
		{"stdio 2026 backend", func(t *testing.T) string { return startStdioGateway(t, tk.node, fixture, "--stdio", "") }},
	}
	var mu sync.Mutex
	runs := map[string]*suiteRun{}
	t.Run("runs", func(t *testing.T) {
		for _, target := range targets {
			t.Run(target.name, func(t *testing.T) {
				t.Parallel()
				url := target.start(t)
				run := &suiteRun{Target: "tasks, " + target.name}
				for _, scenario := range taskScenarios {
					cli := []string{tk.suite2026, "server", "--scenario", scenario}
					one := runServerScenarios(t, tk.node, cli, run.Target+", "+scenario, url, "")
					run.Scenarios = append(run.Scenarios, one.Scenarios...)
				}
				mu.Lock()
				runs[target.name] = run
				mu.Unlock()
			})
		}
	})
	direct := runs["direct"]
	if direct == nil {
		t.Fatal("no direct baseline to compare with (the direct run failed)")
	}
	for _, name := range taskScenarios {
		if r, ok := direct.byName()[name]; !ok || !r.passed() {
			t.Errorf("task scenario %s does not pass directly against the fixture", name)
		}
	}
	for _, target := range targets[1:] {
		run := runs[target.name]
		if run == nil {
			t.Errorf("%s: no run to compare (it failed)", target.name)
			continue
		}
		lost, notes := checkRegressions(direct, run, nil)
		for _, msg := range lost {
			t.Errorf("%s: %s", target.name, msg)
		}
		for _, msg := range notes {
			t.Log("not a regression: " + msg)
		}
		t.Log(run.summary())
	}
}
