package ctl

import "testing"

// TestLastExit: a SIGTERM kill reads as systemd says it, not as exit
// status 15 (issue 22, item 9).
func TestLastExit(t *testing.T) {
	for _, tc := range []struct {
		code   string
		status int32
		want   string
	}{
		{"killed", 15, "killed by SIGTERM"},
		{"exited", 15, "exited with status 15"},
		{"dumped", 11, "killed by SIGSEGV (core dumped)"},
		{"killed", 200, "killed by signal 200"},
		{"", 3, "3"}, // an older daemon, without LastExitCode
	} {
		if got := lastExit(tc.code, tc.status); got != tc.want {
			t.Errorf("lastExit(%q, %d) = %q, want %q", tc.code, tc.status, got, tc.want)
		}
	}
}
