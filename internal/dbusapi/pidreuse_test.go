package dbusapi

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestCallerPIDReuse confirms that telling a backend from the gateway's
// own user by the caller's PID alone can be fooled: a backend calls, and
// exits, and its PID goes to a process that does not descend from the
// gateway, which a walk up from that PID takes for the gateway's user.
// The caller is pinned with a pidfd (pinCaller), and isBackend distrusts
// a caller whose process ended.
func TestCallerPIDReuse(t *testing.T) {
	if last, err := os.ReadFile("/proc/sys/kernel/ns_last_pid"); err != nil || os.WriteFile("/proc/sys/kernel/ns_last_pid", last, 0) != nil {
		testutil.Unavailable(t, "cannot choose the next PID (root is needed for ns_last_pid)")
	}
	a := &BusAuthorizer{Self: uint32(os.Getuid()), Ancestor: os.Getpid()}
	backend := exec.Command("sleep", "60")
	if err := backend.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		backend.Process.Kill()
		backend.Wait()
	})
	pid := backend.Process.Pid
	pidfd, _ := pinCaller(nil, uint32(pid))
	c := caller{uid: a.Self, pid: uint32(pid), pidfd: pidfd}
	defer c.close()
	if !a.isBackend(c) || a.isSelf(c) {
		t.Fatalf("a running child of the gateway: isBackend %v, isSelf %v; want a backend", a.isBackend(c), a.isSelf(c))
	}

	backend.Process.Kill()
	backend.Wait()
	reusePIDOutside(t, pid)
	// The suspicion holds: from the PID alone, the caller no longer
	// descends from the gateway.
	if descendsFrom(pid, a.Ancestor) {
		t.Fatalf("PID %d, reused outside the gateway, still descends from it", pid)
	}
	if !a.isBackend(c) || a.isSelf(c) {
		t.Errorf("a backend whose PID was reused outside the gateway: isBackend %v, isSelf %v; want it still taken for a backend", a.isBackend(c), a.isSelf(c))
	}
}

// reusePIDOutside starts a process with PID pid that is not a descendant
// of the test (a shell starts it in the background and exits, so it goes
// to init or the nearest subreaper above us), by setting ns_last_pid just
// below it; retried while other processes take the PID first. The process is
// killed by PID when the test ends.
func reusePIDOutside(t *testing.T, pid int) {
	t.Helper()
	for range 1000 { // other processes, in containers too, take PIDs meanwhile
		// The shell sets ns_last_pid itself, right before its fork.
		script := "echo " + strconv.Itoa(pid-1) + " >/proc/sys/kernel/ns_last_pid && { sleep 60 </dev/null >/dev/null 2>&1 & echo $!; }"
		out, err := exec.Command("sh", "-c", script).Output()
		if err != nil {
			t.Fatal(err)
		}
		got, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("sh printed %q", out)
		}
		if got == pid {
			t.Cleanup(func() { syscall.Kill(got, syscall.SIGKILL) })
			return
		}
		syscall.Kill(got, syscall.SIGKILL)
	}
	t.Fatalf("could not start a process with PID %d", pid)
}

// TestCallerConnectedBeforeItStarted: on a bus without ProcessFD, a
// caller's PID names the process it had when it connected; a backend
// that connects, hands the connection to a child and exits lets its PID go
// to a process that does not descend from the gateway. A process that
// started after the connection appeared, or runs as another uid than the
// connection's, is not the one that connected: it cannot make the caller
// the gateway's own user or root. Before, a pidfd opened on the PID at
// the call pinned whatever process had it then.
func TestCallerConnectedBeforeItStarted(t *testing.T) {
	outside := func() int { // a process of ours that does not descend from us
		t.Helper()
		out, err := exec.Command("sh", "-c", "sleep 60 </dev/null >/dev/null 2>&1 & echo $!").Output()
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("sh printed %q", out)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	w := &connections{own: 10, since: map[string]time.Duration{}, last: 100}
	w.cond = sync.NewCond(&w.mu)
	a := &BusAuthorizer{Self: uint32(os.Getuid()), Ancestor: os.Getpid(), conns: w}
	creds := func(pid, uid int) map[string]dbus.Variant {
		return map[string]dbus.Variant{"ProcessID": dbus.MakeVariant(uint32(pid)), "UnixUserID": dbus.MakeVariant(uint32(uid))}
	}
	pid := outside()
	start, _, ok := processStart(pid)
	if !ok {
		t.Fatalf("no start time of process %d", pid)
	}
	// Two connections: one that appeared after the process started, and
	// one before it, by more than the start time's 10 ms ticks.
	w.since[":1.50"] = start + time.Millisecond
	w.since[":1.51"] = start - 20*time.Millisecond

	for _, tc := range []struct {
		name   string
		sender string
		pid    int
		uid    int
		self   bool
	}{
		{"started before its connection appeared", ":1.50", pid, os.Getuid(), true},
		{"started after its connection appeared", ":1.51", pid, os.Getuid(), false},
		{"of another uid than the connection's", ":1.50", pid, os.Getuid() + 4242, false},
		{"a connection older than the gateway's", ":1.5", pid, os.Getuid(), true},
		{"a connection newer than the gateway's, never seen", ":1.60", pid, os.Getuid(), false},
	} {
		c, err := a.callerOf(t.Context(), tc.sender, creds(tc.pid, tc.uid))
		if err != nil {
			t.Fatal(err)
		}
		if got := a.isSelf(c) || c.uid == 0 && !a.isBackend(c); got != tc.self || (!tc.self && !a.isBackend(c)) {
			t.Errorf("%s: taken for the gateway's own user: %v, want %v", tc.name, got, tc.self)
		}
		c.close()
	}
}
