// Package proc starts the benchmark's processes, each in its own process
// group, and stops and reaps every one of them, whatever happens.
package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Group owns the processes it started; StopAll ends them all.
type Group struct {
	mu    sync.Mutex
	procs []*Proc
}

// Proc is one started process (the leader of its process group).
type Proc struct {
	Name string
	PID  int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs argv with env added to the environment, its output going to
// out. The process gets SIGKILL if the benchmark dies first.
func (g *Group) Start(name string, argv, env []string, out io.Writer) (*Proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, PID: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop ends the process group with SIGTERM, then SIGKILL after grace, and
// waits for the leader. Whatever is left in the group is killed too.
func (p *Proc) Stop(grace time.Duration) {
	syscall.Kill(-p.PID, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	syscall.Kill(-p.PID, syscall.SIGKILL)
	<-p.done
	// The rest of the group (a gateway's backends) dies asynchronously
	// and is reaped by its parent or by init: wait until it is gone, so
	// that the next scenario starts on a quiet machine.
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err := syscall.Kill(-p.PID, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
}

// StopAll stops every process the group started, the last one first.
func (g *Group) StopAll() {
	g.mu.Lock()
	procs := g.procs
	g.procs = nil
	g.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(3 * time.Second)
	}
}

// Stop stops p and forgets it.
func (g *Group) Stop(p *Proc) {
	p.Stop(3 * time.Second)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.procs {
		if q == p {
			g.procs = append(g.procs[:i], g.procs[i+1:]...)
			break
		}
	}
}

// Memory is a process's resident set, now and at its peak, in KiB.
type Memory struct{ RSS, Peak int64 }

// Mem reads pid's memory from /proc.
func Mem(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n
		case "VmHWM":
			m.Peak = n
		}
	}
	return m, nil
}

// Tree returns pid and all its descendants.
func Tree(pid int) []int {
	parent := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// The command name may hold spaces: fields start after its ')'.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		c, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		parent[pp] = append(parent[pp], c)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, parent[out[i]]...)
	}
	return out
}

// TreeRSS returns the summed RSS of pid and its descendants in KiB, and
// how many processes that is.
func TreeRSS(pid int) (int64, int, error) {
	var sum int64
	pids := Tree(pid)
	for _, p := range pids {
		m, err := Mem(p)
		if err != nil {
			if p == pid {
				return 0, 0, err
			}
			continue
		}
		sum += m.RSS
	}
	if len(pids) == 0 {
		return 0, 0, errors.New("no such process")
	}
	return sum, len(pids), nil
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every architecture Linux runs Go on.
const userHZ = 100

// CPUTime returns the CPU time (user and system, all threads) pid has used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which may hold spaces: state is the
	// first, utime the 12th and stime the 13th.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}
