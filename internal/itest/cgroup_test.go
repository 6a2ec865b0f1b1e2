package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/cgroup/cgrouptest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// cgroupOf returns pid's cgroup-v2 path, "" once it is gone.
func cgroupOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return p
		}
	}
	return ""
}

// Under a delegated cgroup, the daemon moves into its gateway leaf and
// each child gets a cgroup of its own; a child's crash kills what it left
// behind, even a grandchild in a session of its own, and the restarted
// child gets a fresh cgroup.
func TestDelegatedCgroupPerChild(t *testing.T) {
	dir := cgrouptest.New(t)
	bins := testutil.Build(t)
	toml, url := testutil.Config(t, fmt.Sprintf("[backends.fake]\ncommand = %q\nrestart_backoff_initial = \"10ms\"\n", bins.Fake))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Cgroup: dir})
	base := "/" + filepath.Base(dir)
	if got := cgroupOf(d.PID); got != base+"/"+cgroup.GatewayDir {
		t.Errorf("daemon in cgroup %q, want %q", got, base+"/"+cgroup.GatewayDir)
	}
	cs := d.Connect(t, nil)
	child := testutil.FakeProcess(t, cs, "fake__pid")
	if got := cgroupOf(child.PID); got != base+"/backend-fake" {
		t.Errorf("child in cgroup %q, want %q", got, base+"/backend-fake")
	}
	var grand struct{ PID, PGID int }
	structured(t, testutil.MustCallTool(t, cs, "fake__spawn_grandchild", map[string]any{"setsid": true}), &grand)
	if grand.PGID == child.PID {
		t.Fatalf("grandchild %d stayed in the child's process group", grand.PID)
	}
	if got := cgroupOf(grand.PID); got != base+"/backend-fake" {
		t.Errorf("setsid grandchild in cgroup %q, want the child's %q", got, base+"/backend-fake")
	}

	syscall.Kill(child.PID, syscall.SIGKILL)
	awaitNewChild(t, cs, "fake__pid", child.PID)
	if st := testutil.State(grand.PID); st != "" {
		t.Errorf("setsid grandchild %d survived its server's crash (state %s)", grand.PID, st)
	}
	next := testutil.FakeProcess(t, cs, "fake__pid")
	if got := cgroupOf(next.PID); got != base+"/backend-fake" {
		t.Errorf("restarted child in cgroup %q, want %q", got, base+"/backend-fake")
	}
	if code := d.Terminate(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "backend-") {
			t.Errorf("cgroup %s left behind after the daemon stopped", e.Name())
		}
	}
}

// Limits under the process runner need delegation: --check-config and
// start-up refuse them without it, saying how to get it.
func TestLimitsRefusedWithoutDelegation(t *testing.T) {
	if err := cgroup.Check(); err == nil {
		t.Skip("this test runs in a cgroup delegated to it; nothing to refuse")
	}
	bins := testutil.Build(t)
	toml, _ := testutil.Config(t, "[backends.big]\ncommand = \"/bin/cat\"\nmemory_max = \"1G\"\n")
	path := filepath.Join(t.TempDir(), "mcpgate.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{`backend "big" (` + path + `:`, "sets resource limits", `runner = "process"`, "Delegate=yes", "systemd-run --user --scope -p Delegate=yes"}
	out, err := exec.Command(bins.Daemon, "--check-config", "--config", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("--check-config: exit %v, want 1\n%s", err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("--check-config output lacks %q:\n%s", w, out)
		}
	}
	d := testutil.StartDaemon(t, toml, "", testutil.DaemonOptions{NoWait: true})
	if code := d.AwaitExit(t, 30*time.Second); code == 0 {
		t.Errorf("mcpgated started with limits and no delegation")
	}
	for _, w := range want[1:] { // the log quotes the name, and has its own file
		if !strings.Contains(d.Stderr.String(), strings.ReplaceAll(w, `"`, `\"`)) {
			t.Errorf("start-up refusal lacks %q:\n%s", w, d.Stderr.String())
		}
	}
}

// With the controllers a limit needs, its value reaches the child's
// cgroup; elsewhere the test says the host cannot show it.
func TestLimitsWrittenToChildCgroup(t *testing.T) {
	dir := cgrouptest.New(t)
	if have := cgrouptest.Controllers(t, dir); !slices.Contains(have, "memory") || !slices.Contains(have, "pids") {
		t.Skipf("this host has no cgroup v2 memory or pids controller (offers %q); limits cannot be set here, a property of the host", have)
	}
	bins := testutil.Build(t)
	toml, url := testutil.Config(t, fmt.Sprintf("[backends.fake]\ncommand = %q\nmemory_max = \"64M\"\ntasks_max = 32\n", bins.Fake))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Cgroup: dir})
	testutil.FakeProcess(t, d.Connect(t, nil), "fake__pid")
	for name, want := range map[string]string{"memory.max": "67108864", "pids.max": "32"} {
		b, err := os.ReadFile(filepath.Join(dir, "backend-fake", name))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, %v; want %s", name, b, err, want)
		}
	}
}
