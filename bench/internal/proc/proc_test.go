package proc

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCPUTimeAndMemOfThisProcess(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the CPU time grows: on a busy machine that may take
	// longer than the clock tick.
	for deadline := time.Now().Add(20 * time.Second); ; {
		after, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %v while spinning", before)
		}
	}
	m, err := Mem(os.Getpid())
	if err != nil || m.RSS <= 0 || m.Peak < m.RSS {
		t.Errorf("Mem = %+v, %v; want RSS > 0 and a peak at least as large", m, err)
	}
	if pids := Tree(os.Getpid()); len(pids) == 0 || pids[0] != os.Getpid() {
		t.Errorf("Tree = %v, want this process first", pids)
	}
}

func TestStopAllEndsTheWholeGroup(t *testing.T) {
	var g Group
	t.Cleanup(g.StopAll)
	out := &lines{}
	p, err := g.Start("sh", []string{"/bin/sh", "-c", "sleep 60 & echo started; wait"}, nil, out)
	if err != nil {
		t.Fatal(err)
	}
	var tree []int
	for deadline := time.Now().Add(10 * time.Second); len(tree) < 2; tree = Tree(p.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("the shell's child did not start: %v", tree)
		}
	}
	g.StopAll()
	if !p.Exited() {
		t.Error("the leader is still running after StopAll")
	}
	for _, pid := range tree[1:] {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("process %d of the group survived StopAll", pid)
		}
	}
}

// lines is an output sink.
type lines struct{ strings.Builder }

func (l *lines) Write(p []byte) (int, error) { return l.Builder.Write(p) }
