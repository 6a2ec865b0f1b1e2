package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStoppedReport: after a failed run ExecStopPost= says how the server
// ended and where its standard error is; after a clean stop, nothing.
func TestStoppedReport(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string // substrings; none: no report
	}{
		{map[string]string{"SERVICE_RESULT": "success", "EXIT_CODE": "killed", "EXIT_STATUS": "TERM"}, nil},
		{map[string]string{}, nil},
		{map[string]string{"SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "3"},
			[]string{"backend files exited with status 3 (result exit-code)", `"mcpgatectl logs files"`, "MCPGATE_BACKEND=files"}},
		{map[string]string{"SERVICE_RESULT": "signal", "EXIT_CODE": "killed", "EXIT_STATUS": "KILL"},
			[]string{"was killed by signal KILL"}},
		{map[string]string{"SERVICE_RESULT": "core-dump", "EXIT_CODE": "dumped", "EXIT_STATUS": "SEGV"},
			[]string{"dumped core (signal SEGV)"}},
		{map[string]string{"SERVICE_RESULT": "oom-kill", "EXIT_CODE": "killed", "EXIT_STATUS": "KILL"},
			[]string{"(result oom-kill)"}},
	} {
		got := stoppedReport("files", func(k string) string { return tc.env[k] })
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%v: reported %q, want nothing", tc.env, got)
		}
		if len(tc.want) > 0 && got == "" {
			t.Errorf("%v: no report", tc.env)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: %q lacks %q", tc.env, got, w)
			}
		}
	}
}

// TestStoppedCommand: backend-exec --stopped, as the template's
// ExecStopPost= runs it, prints the report on its standard output (the
// unit's journal) and exits 0, so that it never fails a stop.
func TestStoppedCommand(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--stopped", "files")
	cmd.Env = []string{"MCPGATE_TEST_BACKEND_EXEC=1", "SERVICE_RESULT=exit-code", "EXIT_CODE=exited", "EXIT_STATUS=3"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("backend-exec --stopped: %v", err)
	}
	if !strings.Contains(string(out), "exited with status 3") {
		t.Errorf("backend-exec --stopped printed %q", out)
	}
}
