package clitool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// awaitPIDFile returns the pid a program wrote to path, once it has.
func awaitPIDFile(t *testing.T, path string) int {
	t.Helper()
	for range 1000 {
		b, err := os.ReadFile(path)
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// procState returns the state letter of pid in /proc ("Z" for a zombie),
// "" once it is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	state, _, _ := strings.Cut(rest, " ")
	return state
}

// A program whose child leaves its process group (setsid) and keeps its
// output pipes: the call still ends at its timeout instead of waiting for
// that descendant to exit, and the descendant, found by the pipes it
// holds, is killed and reaped with the call.
func TestTimeoutHoldsWhenAGrandchildLeavesTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "escaped")
	// The escaped grandchild sleeps 8s and marks its end before it exits
	// and closes the pipes: a call that waits for it ends after the mark.
	tl := tool([]string{"sh", "-c", `setsid sh -c 'echo $$ > "$0"; sleep 8; touch "$0.ended"' "$1" & echo started`, "sh", pidFile}, nil)
	tl.Timeout = 300 * time.Millisecond
	done := make(chan json.RawMessage, 1)
	go func() {
		raw, _ := Call(context.Background(), tl, nil, Options{Env: os.Environ()})
		done <- raw
	}()
	pid := awaitPIDFile(t, pidFile)
	t.Cleanup(func() {
		unix.Kill(-pid, unix.SIGKILL) // it leads a session and group of its own
		for {
			var ws unix.WaitStatus // reparented to us, the subreaper
			if _, err := unix.Wait4(-pid, &ws, 0, nil); err != nil && err != unix.EINTR {
				break
			}
		}
	})
	raw := <-done
	if !strings.Contains(string(raw), "timeout") {
		t.Errorf("result %s: want a timeout error", raw)
	}
	if _, err := os.Stat(pidFile + ".ended"); err == nil {
		t.Errorf("the call ended only once the escaped grandchild %d had ended: it waited for the pipes it held", pid)
	}
	if st := procState(pid); st != "" {
		t.Errorf("escaped grandchild %d in state %q after the call; want it killed (it held the call's pipes) and reaped", pid, st)
	}
}
