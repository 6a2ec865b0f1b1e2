package dbusapi

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

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
	c := caller{uid: a.Self, pid: uint32(pid), pidfd: pinCaller(nil, uint32(pid))}
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
