package cgroup_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/cgroup/cgrouptest"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// allocEnv makes the test binary a child that allocates and touches this
// many MiB, then exits 0.
const allocEnv = "MCPGATE_CGROUP_TEST_ALLOC_MIB"

func TestMain(m *testing.M) {
	if mib := os.Getenv(allocEnv); mib != "" {
		n, _ := strconv.Atoi(mib)
		b := make([]byte, n<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		os.Exit(0)
	}
	testutil.Main(m)
}

func TestOpenWithoutDelegation(t *testing.T) {
	// The test runs where it was started: not in a cgroup delegated to it
	// (root's cgroups carry no delegate mark unless systemd set one).
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cgroup.Open()
	if err == nil {
		t.Skipf("this test runs in a delegated cgroup already (%s); nothing to refuse", own)
	}
	if !errors.Is(err, cgroup.ErrNotDelegated) || !strings.Contains(err.Error(), "Delegate=yes") {
		t.Errorf("Open() = %v, want ErrNotDelegated saying how to get Delegate=yes", err)
	}
	after, _ := os.ReadFile("/proc/self/cgroup")
	if string(after) != string(own) {
		t.Errorf("a refused Open moved the process from %q to %q", own, after)
	}
}

func TestOpenRefusesUnmarkedCgroupToRoot(t *testing.T) {
	dir := cgrouptest.New(t)
	if err := unix.Removexattr(dir, "user.delegate"); err != nil {
		t.Fatal(err)
	}
	cgrouptest.EnterDir(t, dir)
	_, err := cgroup.Open()
	if !errors.Is(err, cgroup.ErrNotDelegated) || !strings.Contains(err.Error(), "no trusted.delegate or user.delegate mark") {
		t.Errorf("Open() in an unmarked cgroup as root = %v, want ErrNotDelegated naming the mark", err)
	}
}

func TestOpenMovesIntoGateway(t *testing.T) {
	dir := cgrouptest.Enter(t)
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	if tree.Dir() != dir {
		t.Errorf("Dir() = %s, want %s", tree.Dir(), dir)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if want := "0::/" + filepath.Base(dir) + "/" + cgroup.GatewayDir; !strings.Contains(string(own), want) {
		t.Errorf("/proc/self/cgroup = %q, want %q", own, want)
	}
	// A second Open in the same process finds the same tree.
	again, err := cgroup.Open()
	if err != nil || again.Dir() != dir {
		t.Errorf("second Open() = %v, %v; want the tree %s", again, err, dir)
	}
}

// start runs argv in g and returns the command and its first line of
// output; the child is killed and reaped in t.Cleanup.
func start(t *testing.T, g *cgroup.Group, env []string, argv ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: g.FD()}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	return cmd, strings.TrimSpace(line)
}

func TestKillCatchesSetsidGrandchild(t *testing.T) {
	cgrouptest.Enter(t)
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.New("fake", config.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove(context.Background()) })
	// A grandchild in a session of its own: out of reach of the child's
	// process group, not of its cgroup.
	cmd, line := start(t, g, nil, "/bin/sh", "-c", "setsid sh -c 'echo $$; exec sleep 1000 >/dev/null' </dev/null & exec sleep 1000 >/dev/null")
	grandchild, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	cg, err := os.ReadFile("/proc/" + line + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cg), "/backend-fake\n") {
		t.Errorf("grandchild's cgroup is %q, want the child's backend-fake", cg)
	}
	if sid, _ := unix.Getsid(grandchild); sid != grandchild {
		t.Fatalf("grandchild %d is in session %d, not one of its own", grandchild, sid)
	}
	pids, err := g.Procs()
	if err != nil || !slices.Contains(pids, cmd.Process.Pid) || !slices.Contains(pids, grandchild) {
		t.Errorf("Procs() = %v, %v; want child %d and grandchild %d", pids, err, cmd.Process.Pid, grandchild)
	}

	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("child ended with %v, want SIGKILL", err)
	}
	if err := g.WaitEmpty(context.Background()); err != nil {
		t.Fatal(err)
	}
	if populated, err := g.Populated(); err != nil || populated {
		t.Errorf("Populated() = %v, %v after WaitEmpty", populated, err)
	}
	if err := g.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s still there after Remove: %v", g.Path(), err)
	}
}

func TestNewReplacesEmptyGroup(t *testing.T) {
	cgrouptest.Enter(t)
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.New("again", config.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, g, nil, "/bin/sh", "-c", "echo up; exec sleep 1000")
	busy, err := tree.New("again", config.Resources{})
	if err != nil || busy.Path() != g.Path()+"~2" {
		t.Errorf("New beside a populated group = %v, %v; want %s~2", busy, err, g.Path())
	} else if err := busy.Remove(context.Background()); err != nil {
		t.Error(err)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitEmpty(context.Background()); err != nil {
		t.Fatal(err)
	}
	g2, err := tree.New("again", config.Resources{}) // the old directory is empty now
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Remove(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestStats(t *testing.T) {
	dir := cgrouptest.Enter(t)
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.New("stats", config.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove(context.Background()) })
	start(t, g, nil, "/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; echo busy; exec sleep 1000")
	s, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUUsageNSec == cgroup.Unknown || s.CPUUsageNSec == 0 {
		t.Errorf("CPUUsageNSec = %d after a busy loop, want a positive count", s.CPUUsageNSec)
	}
	controllers := cgrouptest.Controllers(t, dir)
	for _, c := range []struct {
		controller string
		got        uint64
	}{{"memory", s.MemoryCurrent}, {"pids", s.TasksCurrent}} {
		switch {
		case slices.Contains(controllers, c.controller) && (c.got == cgroup.Unknown || c.got == 0):
			t.Errorf("%s usage = %d with the %s controller on, want a positive value", c.controller, c.got, c.controller)
		case !slices.Contains(controllers, c.controller) && c.got != cgroup.Unknown:
			t.Errorf("%s usage = %d without the %s controller, want Unknown", c.controller, c.got, c.controller)
		}
	}
	if slices.Contains(controllers, "pids") && s.TasksCurrent != 1 {
		t.Errorf("TasksCurrent = %d, want 1 (the sleep)", s.TasksCurrent)
	}
	if n, err := g.OOMKills(); err != nil || n != 0 {
		t.Errorf("OOMKills() = %d, %v; want 0", n, err)
	}
}

func TestLimitsNeedTheirController(t *testing.T) {
	dir := cgrouptest.Enter(t)
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	controllers := cgrouptest.Controllers(t, dir)
	for _, tt := range []struct {
		controller string
		r          config.Resources
	}{
		{"memory", config.Resources{MemoryMax: config.Limit{Value: 1 << 30}}},
		{"pids", config.Resources{TasksMax: config.Limit{Value: 10}}},
		{"cpu", config.Resources{CPUQuota: 5000}},
		{"io", config.Resources{IOWeight: 10}},
	} {
		t.Run(tt.controller, func(t *testing.T) {
			if slices.Contains(controllers, tt.controller) {
				t.Skipf("this host offers the %s controller; nothing to refuse", tt.controller)
			}
			g, err := tree.New("limited", tt.r)
			if err == nil {
				g.Remove(context.Background())
				t.Fatalf("New with a %s limit succeeded without the %s controller", tt.controller, tt.controller)
			}
			want := "the limits need the cgroup v2 controller " + tt.controller + ", which cgroup " + dir + " does not offer"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("New() = %v, want %q", err, want)
			}
			if _, err := os.Stat(filepath.Join(dir, "backend-limited")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused New left its cgroup behind: %v", err)
			}
		})
	}
}

// requireControllers skips the test on a host whose cgroup v2 hierarchy
// does not offer the controllers.
func requireControllers(t *testing.T, dir string, want ...string) {
	t.Helper()
	have := cgrouptest.Controllers(t, dir)
	for _, c := range want {
		if !slices.Contains(have, c) {
			t.Skipf("this host has no cgroup v2 %s controller (cgroup.controllers of %s: %q), so the kernel cannot enforce this limit here; it is a property of the host", c, dir, have)
		}
	}
}

func TestLimitFilesWritten(t *testing.T) {
	dir := cgrouptest.Enter(t)
	requireControllers(t, dir, "memory", "pids", "cpu")
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.New("files", config.Resources{
		MemoryMax:  config.Limit{Value: 64 << 20},
		MemoryHigh: config.Limit{Value: 48 << 20},
		TasksMax:   config.Limit{Value: 32},
		CPUWeight:  50,
		CPUQuota:   2000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove(context.Background()) })
	for name, want := range map[string]string{
		"memory.max":  "67108864",
		"memory.high": "50331648",
		"pids.max":    "32",
		"cpu.weight":  "50",
		"cpu.max":     "20000 100000",
	} {
		b, err := os.ReadFile(filepath.Join(g.Path(), name))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
}

func TestMemoryMaxOOMKill(t *testing.T) {
	dir := cgrouptest.Enter(t)
	requireControllers(t, dir, "memory")
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.New("oom", config.Resources{MemoryMax: config.Limit{Value: 32 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove(context.Background()) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// With swap the kernel would page the allocation out instead of
	// killing it; mcpgate leaves swap alone, the test does not.
	if err := os.WriteFile(filepath.Join(g.Path(), "memory.swap.max"), []byte("0"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), allocEnv+"=1024")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}
	err = cmd.Run()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child allocating 1 GiB under memory_max 32M ended with %v, want SIGKILL by the OOM killer", err)
	}
	if n, err := g.OOMKills(); err != nil || n == 0 {
		t.Errorf("OOMKills() = %d, %v; want at least 1", n, err)
	}
}
