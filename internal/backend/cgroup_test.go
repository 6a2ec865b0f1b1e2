package backend

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/cgroup/cgrouptest"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// spawnInGroup starts argv in a new sub-cgroup name of a delegated tree
// the test process moved into, and returns it with the first line it
// printed.
func spawnInGroup(t *testing.T, name string, r config.Resources, argv ...string) (*process, *cgroup.Group, string) {
	t.Helper()
	tree, err := cgroup.Open()
	if err != nil {
		t.Fatal(err)
	}
	g, err := tree.New(name, r)
	if err != nil {
		t.Fatal(err)
	}
	p, err := spawn(argv, nil, "", g, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		p.stdio.close()
	})
	p.stdin.Close()
	line, _ := bufio.NewReader(p.stdout).ReadString('\n')
	return p, g, strings.TrimSpace(line)
}

// The SIGKILL step of a stop goes to the child's cgroup, so it reaches a
// grandchild in a session of its own; wait removes the emptied cgroup.
func TestSigkillReachesSetsidGrandchild(t *testing.T) {
	cgrouptest.Enter(t)
	p, g, line := spawnInGroup(t, "stop", config.Resources{},
		"/bin/sh", "-c", "setsid sh -c 'echo $$; exec sleep 1000 >/dev/null' </dev/null & exec sleep 1000 >/dev/null")
	grandchild, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	pids, _ := g.Procs()
	if !slices.Contains(pids, grandchild) {
		t.Fatalf("grandchild %d not in the child's cgroup %v", grandchild, pids)
	}
	if err := p.signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	info := p.wait()
	if info.Signal != "SIGKILL" || info.OOM {
		t.Errorf("exit %+v, want SIGKILL and no OOM", info)
	}
	// Dead: gone, or a zombie of init (the test is no subreaper).
	if st := testutil.State(grandchild); st != "" && st != "Z" {
		t.Errorf("grandchild %d still running after wait (state %s)", grandchild, st)
	}
	if _, err := os.Stat(g.Path()); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left after wait: %v", g.Path(), err)
	}
}

// A child the kernel kills for passing memory_max ends as an OOM kill.
func TestOOMKillIsReported(t *testing.T) {
	dir := cgrouptest.Enter(t)
	if have := cgrouptest.Controllers(t, dir); !slices.Contains(have, "memory") {
		t.Skipf("this host has no cgroup v2 memory controller (offers %q), so memory_max cannot be enforced here; a property of the host", have)
	}
	p, g, _ := spawnInGroup(t, "oom", config.Resources{MemoryMax: config.Limit{Value: 16 << 20}},
		"/bin/sh", "-c", "echo up; x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo survived")
	// No swap for the test's child: the kernel must kill, not page out.
	if err := os.WriteFile(filepath.Join(g.Path(), "memory.swap.max"), []byte("0"), 0); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	info := p.wait()
	if !info.OOM || !strings.Contains(info.Text, "OOM") {
		t.Errorf("exit %+v, want an OOM kill", info)
	}
}
