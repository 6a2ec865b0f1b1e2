package ctl

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

func TestPrintBackend(t *testing.T) {
	now := time.Date(2025, 3, 4, 10, 5, 30, 0, time.UTC)
	b := dbusapi.BackendStatus{
		Name: "github", State: "failed", NRestarts: 5, LastExitStatus: 1, LastExitCode: "exited",
		LastError:            "exited with status 1\nsecond line",
		StateChangeTimestamp: uint64(now.Add(-3*time.Minute - 5*time.Second).UnixMicro()),
		Command:              []string{"npx", "-y", "server-github"},
		StderrTail:           []string{"l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9", "l10", "l11"},
		ConsecutiveFailures:  3,
		LastCheckTimestamp:   uint64(now.Add(-2 * time.Second).UnixMicro()),
		LastCheckLatencyUSec: 1500,
		CircuitOpenTimestamp: uint64(now.Add(-10 * time.Second).UnixMicro()),
		CallsInFlight:        1, CallsQueued: 2, NCalls: 40, NFailedCalls: 4, NFallbacks: 3,
		Unit: "mcpgate-backend@github.service", TasksCurrent: 7, MemoryCurrent: 12897485, CPUUsageNSec: 1234567890,
	}
	for _, tc := range []struct {
		colour bool
		want   string
	}{
		{false, `● github
       State: failed since Tue 2025-03-04 10:02:25 UTC; 3min 5s ago
     Command: npx -y server-github
    Main PID: -
        Unit: mcpgate-backend@github.service
       Tasks: 7
      Memory: 12.3M
         CPU: 1.235s
    Restarts: 5
       Tools: 0
     Circuit: open since Tue 2025-03-04 10:05:20 UTC; 10s ago
      Health: last check took 1.5ms, 2s ago; 3 failed in a row
       Calls: 1 in flight, 2 queued; 40 in all, 4 failed, 3 served by a fallback
   Last exit: exited with status 1
  Last error: exited with status 1; second line

l2
l3
l4
l5
l6
l7
l8
l9
l10
l11
`},
		{true, "\x1b[0;1;31m●\x1b[0m github\n"},
	} {
		var out bytes.Buffer
		printBackend(&out, b, now, tc.colour)
		if tc.colour {
			if !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("coloured: got %q, want it to start with %q", out.String(), tc.want)
			}
			continue
		}
		if out.String() != tc.want {
			t.Errorf("got:\n%s\nwant:\n%s", out.String(), tc.want)
		}
	}
}

func TestPrintOverview(t *testing.T) {
	s := statusJSON{
		Gateway: dbusapi.ManagerStatus{Version: "1.0", Status: "1/2 backends healthy, 3 tools; beta starting", NSessions: 2},
		Backends: []dbusapi.BackendStatus{
			{Name: "alpha", State: "healthy", Era: "modern", MainPID: 1234, Tools: []string{"a", "b", "c"}, CallsInFlight: 2, LastCheckTimestamp: 1, LastCheckLatencyUSec: 250},
			{Name: "beta-long-name", State: "starting", NRestarts: 2, LastError: "exited with status 1"},
		},
	}
	var out bytes.Buffer
	printOverview(&out, s, false)
	want := `● mcpgate 1.0 - 1/2 backends healthy, 3 tools; beta starting
  Sessions: 2

  BACKEND         STATE     ERA     PID   RESTARTS  TOOLS  CIRCUIT  IN FLIGHT  QUEUED  CHECK  LAST ERROR
● alpha           healthy   modern  1234  0         3      closed   2          0       250µs
● beta-long-name  starting  -       -     2         0      closed   0          0       -      exited with status 1
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	printOverview(&out, s, true)
	if lines := strings.Split(out.String(), "\n"); !strings.HasPrefix(lines[0], ansiYellow+"●"+ansiReset+" mcpgate") ||
		!strings.HasPrefix(lines[4], ansiGreen+"●"+ansiReset+" alpha  ") || !strings.HasPrefix(lines[5], ansiYellow+"●"+ansiReset+" beta-long-name  starting") {
		t.Errorf("coloured:\n%q", out.String())
	}
}

// TestPrintBackendUnknownUsage: what no cgroup accounts for is not shown.
func TestPrintBackendUnknownUsage(t *testing.T) {
	var out bytes.Buffer
	printBackend(&out, dbusapi.BackendStatus{Name: "x", State: "healthy",
		MemoryCurrent: math.MaxUint64, TasksCurrent: math.MaxUint64, CPUUsageNSec: math.MaxUint64}, time.Now(), false)
	for _, label := range []string{"Unit:", "Tasks:", "Memory:", "CPU:"} {
		if strings.Contains(out.String(), label) {
			t.Errorf("shows %s for a backend without a unit or cgroup:\n%s", label, out.String())
		}
	}
}

func TestIECBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0K", 12897485: "12.3M", 3 << 30: "3.0G"} {
		if got := iecBytes(n); got != want {
			t.Errorf("iecBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{dbus.Error{Name: dbusapi.ErrorNoSuchBackend}, exitNoSuchBackend},
		{fmt.Errorf("wrapped: %w", dbus.Error{Name: dbusapi.ErrorAccessDenied}), exitAccessDenied},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied"}, exitAccessDenied},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.ServiceUnknown"}, exitNotRunning},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.NameHasNoOwner"}, exitNotRunning},
		{dbus.Error{Name: dbusapi.ErrorFailed}, exitFailed},
		{dbus.Error{Name: dbusapi.ErrorInvalidConfig}, exitFailed},
		{errors.New("something else"), exitFailed},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestJournalctlArgs(t *testing.T) {
	for _, tc := range []struct {
		user, follow bool
		lines        int
		want         string
	}{
		{false, false, -1, "journalctl --unit=mcpgate.service MCPGATE_BACKEND=gh"},
		{true, true, 0, "journalctl --user-unit=mcpgate.service MCPGATE_BACKEND=gh --follow --lines=0"},
	} {
		if got := strings.Join(journalctlArgs("MCPGATE_BACKEND=gh", tc.user, tc.follow, tc.lines), " "); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	c := &cli{}
	fs := c.flagSet("test")
	pos, err := parseInterleaved(fs, []string{"alpha", "--json", "beta", "--user"})
	if err != nil || !slices.Equal(pos, []string{"alpha", "beta"}) || !c.opts.json || !c.opts.user {
		t.Errorf("got %v, %v, opts %+v", pos, err, c.opts)
	}
}

// Every command Commands lists is dispatched (never "unknown command") and
// named in the help text.
func TestCommandsAreDispatchedAndListed(t *testing.T) {
	for _, name := range Commands() {
		if !strings.Contains(usage, "\n  "+name) {
			t.Errorf("the help text does not list %q", name)
		}
		var stdout, stderr strings.Builder
		run([]string{name, "--no-such-flag-xyz"}, strings.NewReader(""), &stdout, &stderr)
		if strings.Contains(stderr.String(), "unknown command") {
			t.Errorf("%q is not dispatched: %s", name, stderr.String())
		}
	}
}

func TestPrintBackendInstances(t *testing.T) {
	b := dbusapi.BackendStatus{
		Name: "browser", State: "healthy", Command: []string{"browser-mcp"},
		Instances: []dbusapi.Instance{
			{PID: 4242, Session: "018c322d5bdc", State: "healthy", Name: "browser-1"},
			{PID: 4246, Session: "r3e6ac8b3-1k", State: "healthy", Name: "browser-2"},
			{PID: 4250, State: "healthy", Name: "browser-3"},
			{State: "starting", Name: "browser-4"},
		},
		NBusy: 2, NIdle: 1,
	}
	var out bytes.Buffer
	printBackend(&out, b, time.Now(), false)
	want := `   Instances: 2 busy, 1 idle
              browser-1  4242  healthy  session 018c322d5bdc
              browser-2  4246  healthy  request r3e6ac8b3-1k
              browser-3  4250  healthy  idle
              browser-4  -  starting  idle
`
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("got:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
}

// An idle on-demand backend does not make the gateway look like it is
// starting: like a stopped one, it is not expected to run.
func TestPrintOverviewIdle(t *testing.T) {
	s := statusJSON{
		Gateway: dbusapi.ManagerStatus{Version: "1.0", Status: "1/1 backend healthy, 1 idle on demand, 3 tools"},
		Backends: []dbusapi.BackendStatus{
			{Name: "alpha", State: "healthy", MainPID: 1234},
			{Name: "lazy", State: "idle"},
		},
	}
	var out bytes.Buffer
	printOverview(&out, s, true)
	if lines := strings.Split(out.String(), "\n"); !strings.HasPrefix(lines[0], ansiGreen+"●"+ansiReset+" mcpgate") || !strings.HasPrefix(lines[5], "● lazy") {
		t.Errorf("coloured:\n%q", out.String())
	}
}
