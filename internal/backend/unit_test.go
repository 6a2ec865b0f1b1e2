package backend

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/unitrun"
)

// TestUnitExit: how systemd says a unit's run ended becomes the exit the
// journal and D-Bus report; an OOM kill is one.
func TestUnitExit(t *testing.T) {
	for _, tc := range []struct {
		in   unitrun.Exit
		want ExitInfo
	}{
		{unitrun.Exit{Result: "exit-code", Code: 1, Status: 3}, ExitInfo{Code: 3, Known: true, Text: "exited with status 3"}},
		{unitrun.Exit{Result: "signal", Code: 2, Status: 9}, ExitInfo{Code: -1, Signal: "SIGKILL", Known: true, Text: "killed by signal SIGKILL"}},
		{unitrun.Exit{Result: "core-dump", Code: 3, Status: 11}, ExitInfo{Code: -1, Signal: "SIGSEGV", Dumped: true, Known: true, Text: "killed by signal SIGSEGV (core dumped)"}},
		{unitrun.Exit{Result: "oom-kill", Code: 2, Status: 9}, ExitInfo{Code: -1, Signal: "SIGKILL", OOM: true, Known: true, Text: "killed by the OOM killer (its memory_max)"}},
		{unitrun.Exit{Lost: true}, ExitInfo{Code: -1, Text: "ended (lost track of its unit: the bus connection closed)"}},
	} {
		if got := unitExit(tc.in); got != tc.want {
			t.Errorf("unitExit(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	var x journal.BackendExit
	unitExit(unitrun.Exit{Result: "oom-kill", Code: 2, Status: 9}).journalExit(&x)
	if !x.OOM || x.ExitCode != "killed" || x.Signal != "SIGKILL" || x.ExitStatus != 9 {
		t.Errorf("the journal entry of an OOM kill: %+v", x)
	}
}
