package ctl

import (
	"strings"
	"testing"
)

// TestDescribeNotRunning: when the gateway is not on the bus, mcpgatectl
// says what its units' states mean: right after installation the socket
// listens and the first connection starts the daemon.
func TestDescribeNotRunning(t *testing.T) {
	listening := []string{"127.0.0.1:7431", "/run/mcpgate/mcpgate.sock"}
	for _, tc := range []struct {
		name   string
		states unitStates
		user   bool
		want   []string // substrings; none: nothing to add
	}{
		{"fresh install", unitStates{socket: "active", listen: listening, service: "inactive", serviceSub: "dead"}, false,
			[]string{"not running on the system bus yet", "mcpgate.socket is listening on 127.0.0.1:7431 and /run/mcpgate/mcpgate.sock", "the first connection to it", `"systemctl start mcpgate"`}},
		{"user", unitStates{socket: "active", service: "inactive"}, true,
			[]string{`"systemctl --user start mcpgate"`}},
		{"socket stopped", unitStates{socket: "inactive", service: "inactive"}, false,
			[]string{"mcpgate.socket is not listening (it is inactive)", `"systemctl start mcpgate.socket"`}},
		{"failed", unitStates{socket: "active", service: "failed", serviceResult: "exit-code"}, false,
			[]string{"mcpgate.service failed (result exit-code)", `"systemctl status mcpgate"`, "the next connection"}},
		{"failed without socket", unitStates{socket: "inactive", service: "failed", serviceResult: "watchdog"}, false,
			[]string{"failed (result watchdog)"}},
		{"starting", unitStates{socket: "active", service: "activating", serviceSub: "start"}, false,
			[]string{"not on the system bus yet: mcpgate.service is activating (start)", "try again"}},
		{"stopping", unitStates{service: "deactivating"}, false, []string{"stopping"}},
		{"active but off the bus", unitStates{socket: "active", service: "active"}, false, nil},
	} {
		got := describeNotRunning(tc.states, map[bool]string{false: "system", true: "session"}[tc.user], tc.user)
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%s: %q, want nothing", tc.name, got)
		}
		if len(tc.want) > 0 && got == "" {
			t.Errorf("%s: nothing said", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}
