package itest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// processesWith returns the pids whose command line is exactly argv.
func processesWith(t *testing.T, argv []string) []int {
	t.Helper()
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(data, want) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
		if testutil.State(pid) != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestManagedPrerequisite(t *testing.T) {
	// A sleep with a duration no other test uses is the prerequisite.
	marker := fmt.Sprintf("%d.%d", 4000+os.Getpid()%1000, time.Now().UnixNano()%1000000)
	argv := []string{"/bin/sleep", marker}
	backends := fmt.Sprintf(`
[backends.alpha]
command = "FAKE"

[backends.alpha.prerequisite]
command = "/bin/sleep"
args = [%q]
process_match = %q
managed = true
`, marker, `^/bin/sleep `+strings.ReplaceAll(marker, ".", `\.`)+`$`)
	first := gateway(t, backends)
	pids := processesWith(t, argv)
	if len(pids) != 1 {
		t.Fatalf("%d prerequisite processes after the first start, want 1", len(pids))
	}
	prereq := pids[0]
	t.Cleanup(func() { unix.Kill(prereq, unix.SIGKILL) })
	if ppid := testutil.PPID(prereq); ppid != first.PID {
		t.Errorf("the prerequisite's parent is %d, want mcpgated %d", ppid, first.PID)
	}
	if pgid, _ := unix.Getpgid(prereq); pgid != prereq {
		t.Errorf("the prerequisite runs in process group %d, want its own", pgid)
	}
	cs := first.Connect(t, nil)
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "alpha__echo", map[string]any{"text": "up"})); got != "up" {
		t.Errorf("alpha__echo = %q", got)
	}

	// A second gateway with the same backend finds the running
	// prerequisite by process_match and starts none.
	second := gateway(t, backends)
	if got := processesWith(t, argv); len(got) != 1 || got[0] != prereq {
		t.Errorf("prerequisite processes after a second start: %v, want only %d", got, prereq)
	}
	if !strings.Contains(second.Stderr.String(), "prerequisite is running; starting nothing") {
		t.Errorf("the second gateway did not log that it found the prerequisite")
	}
	second.Terminate(t)
	if err := unix.Kill(prereq, 0); err != nil {
		t.Errorf("the second gateway's stop ended a prerequisite it did not start: %v", err)
	}

	// The first gateway stops its prerequisite, after the backend, and
	// reaps it before it exits.
	first.Terminate(t)
	if err := unix.Kill(prereq, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("the prerequisite %d outlived the gateway that started it (kill 0: %v)", prereq, err)
	}
	log := first.Stderr.String()
	if i, j := strings.Index(log, `backend \"alpha\" stopped:`), strings.Index(log, `backend \"alpha\": stopped the prerequisite`); i < 0 || j < i {
		t.Errorf("want the backend stopped before its prerequisite; log:\n%s", log)
	}
}

func TestUnmanagedPrerequisiteFailures(t *testing.T) {
	_, client, _ := gatewayOnBus(t, `
[backends.fails]
command = "FAKE"
max_restarts = 0
[backends.fails.prerequisite]
command = "/bin/sh"
args = ["-c", "echo cannot start the database >&2; exit 3"]

[backends.slow]
command = "FAKE"
max_restarts = 0
prerequisite_timeout = "300ms"
[backends.slow.prerequisite]
command = "/bin/sleep"
args = ["30"]

[backends.runs]
command = "FAKE"
[backends.runs.prerequisite]
command = "/bin/true"
`)
	ctx := testutil.Context(t, 10*time.Second)
	for name, want := range map[string]string{
		"fails": "prerequisite /bin/sh exited with status 3",
		"slow":  "prerequisites not ready within prerequisite_timeout (300ms)",
		"runs":  "",
	} {
		b, err := client.Backend(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		wantState := "failed"
		if want == "" {
			wantState = "healthy"
		}
		if b.State != wantState || !strings.Contains(b.LastError, want) {
			t.Errorf("%s: state %s, LastError %q; want %s with %q", name, b.State, b.LastError, wantState, want)
		}
	}
}

func TestUnmanagedPrerequisiteKeepsItsService(t *testing.T) {
	marker := fmt.Sprintf("%d.%d", 5000+os.Getpid()%1000, time.Now().UnixNano()%1000000)
	d := gateway(t, fmt.Sprintf(`
[backends.alpha]
command = "FAKE"
[backends.alpha.prerequisite]
command = "/bin/sh"
args = ["-c", "echo starting the service; /bin/sleep %s & exit 0"]
`, marker))
	pids := processesWith(t, []string{"/bin/sleep", marker})
	if len(pids) != 1 {
		t.Fatalf("%d services after the start, want 1 still running", len(pids))
	}
	cs := d.Connect(t, nil)
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "alpha__echo", map[string]any{"text": "up"})); got != "up" {
		t.Errorf("alpha__echo = %q", got)
	}
	d.Stderr.Await(t, 10*time.Second, "the command's output in the log", func(s string) bool {
		return strings.Contains(s, "starting the service")
	})
	// mcpgated reaps the service when it ends, though it did not start it
	// itself.
	unix.Kill(pids[0], unix.SIGKILL)
	testutil.Eventually(t, 10*time.Second, "the service to be reaped", func() bool { return testutil.State(pids[0]) == "" })
}
