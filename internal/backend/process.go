package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
)

// ChildEnv returns base without the variables systemd hands the daemon
// (config.ReservedEnv: they describe the daemon's own sockets), with extra
// added, replacing variables of the same name.
func ChildEnv(base []string, extra map[string]string) []string {
	reserved := config.ReservedEnv()
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(reserved, name) {
			continue
		}
		if _, override := extra[name]; override {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// process is one spawned child: the leader of its own process group, with
// its three standard streams connected to pipes owned by us, and with a
// cgroup of its own when the daemon has a delegated one.
type process struct {
	stdio
	osp   *os.Process // through its pidfd: never another process that reuses the pid
	pid   int
	group *cgroup.Group // nil without a delegated cgroup
	// detached is set once the process is handed to the next mcpgated (see
	// Backend.Detach): nothing of this one signals it any more.
	detached atomic.Bool
}

// Spawner starts a command: cmd.Start, on a thread of the caller's choice.
// A child's parent-death signal is bound to the thread that started it,
// and an in-place re-exec ends every thread but the one that calls execve:
// children that outlive a re-exec are started on that thread (see
// Options.Spawn).
type Spawner func(cmd *exec.Cmd) error

// spawn starts argv in its own process group, and in group unless it is
// nil, with start (cmd.Start if nil). The child gets SIGKILL if the daemon
// dies, so a crashed or killed daemon never leaves it behind. The process
// owns group from then on, and removes it in wait; spawn removes it if the
// child does not start.
func spawn(argv []string, env []string, dir string, group *cgroup.Group, start Spawner) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if group != nil {
		// In its group from its first instruction: nothing it starts
		// escapes the group's limits or its cgroup.kill.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, group.FD()
	}
	removeGroup := func() {
		if group != nil {
			group.Remove(context.Background())
		}
	}

	ours, theirs, err := newStdio()
	if err != nil {
		removeGroup()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs[0], theirs[1], theirs[2]
	if start == nil {
		start = (*exec.Cmd).Start
	}
	err = start(cmd)
	closeFiles(theirs[:])
	if err != nil {
		ours.close()
		removeGroup()
		return nil, err
	}
	return &process{stdio: ours, osp: cmd.Process, pid: cmd.Process.Pid, group: group}, nil
}

func (p *process) id() int          { return p.pid }
func (p *process) streams() *stdio  { return &p.stdio }
func (p *process) unitName() string { return "" }

// usage reads the child's cgroup; unknown without one.
func (p *process) usage() Usage {
	if p.group == nil {
		return unknownUsage
	}
	s, _ := p.group.Stats() // what could not be read stays unknown
	return Usage{MemoryCurrent: s.MemoryCurrent, TasksCurrent: s.TasksCurrent, CPUUsageNSec: s.CPUUsageNSec}
}

// signal sends sig to the child's whole process group; SIGKILL goes to its
// whole cgroup when it has one, reaching what left the process group.
func (p *process) signal(sig unix.Signal) error {
	if p.detached.Load() {
		return nil
	}
	if sig == unix.SIGKILL && p.group != nil {
		return p.group.Kill()
	}
	return p.signalGroup(sig)
}

// signalGroup sends sig to the child's whole process group. ESRCH (nothing
// left) is not an error.
func (p *process) signalGroup(sig unix.Signal) error {
	if p.detached.Load() {
		return nil
	}
	err := unix.Kill(-p.pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// kill sends SIGKILL to the child's cgroup, or without one to the group
// leader through its pidfd (os.Process uses one on Linux). Either never
// reaches another process that reuses the pid of a reaped child (the
// pidfd returns os.ErrProcessDone then). Reaping the leader kills the rest
// of its group (see wait).
func (p *process) kill() error {
	if p.detached.Load() {
		return nil
	}
	if p.group != nil {
		return p.group.Kill()
	}
	return p.osp.Signal(syscall.SIGKILL)
}

// wait reaps the group leader, kills whatever else is left in its process
// group and its cgroup (the server is gone; its helpers are orphans now)
// and reaps those that were reparented to us. The daemon is a child
// subreaper, so a double-forked grandchild comes back to us rather than to
// init. The child's cgroup is removed once empty; a kernel OOM kill in it
// marks the exit as one.
func (p *process) wait() ExitInfo {
	state, err := p.osp.Wait()
	if p.detached.Load() {
		// It exited after it was handed on: the next mcpgated finds it
		// gone and starts it again. Its group is not ours to reap.
		return ExitInfo{Code: -1, Text: "exited after it was handed to the next mcpgated"}
	}
	_ = p.signalGroup(unix.SIGKILL)
	var escaped []int // left the process group, still in the cgroup
	if p.group != nil {
		escaped, _ = p.group.Procs()
		_ = p.group.Kill()
	}
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-p.pid, &ws, 0, nil); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			break // ECHILD: no member of the group is our child any more
		}
	}
	oom := false
	if p.group != nil {
		// Dead once the group is empty: reap those reparented to us.
		_ = p.group.WaitEmpty(context.Background())
		for _, pid := range escaped {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
		n, _ := p.group.OOMKills()
		oom = n > 0
		_ = p.group.Remove(context.Background())
	}
	if err != nil {
		return ExitInfo{Code: -1, OOM: oom, Text: "wait: " + err.Error()}
	}
	info := exitInfo(state)
	if oom {
		info.OOM = true
		info.Text = "killed by the kernel's OOM killer at memory_max (" + info.Text + ")"
	}
	return info
}

// ExitInfo describes how a child ended.
type ExitInfo struct {
	Code   int    // exit code, or -1 when killed by a signal or unknown
	Signal string // signal name when killed by a signal, e.g. "SIGKILL"
	Dumped bool   // killed by a signal and dumped core
	OOM    bool   // the kernel's OOM killer ended it (its memory_max)
	Known  bool   // Code or Signal says how it ended
	Text   string // human-readable, e.g. "exited with status 3"
}

// journalExit fills in how the child ended for its journal entry.
func (e ExitInfo) journalExit(x *journal.BackendExit) {
	x.OOM = e.OOM
	switch {
	case !e.Known:
	case e.Signal != "":
		x.ExitCode, x.ExitStatus, x.Signal = "killed", int(unix.SignalNum(e.Signal)), e.Signal
		if e.Dumped {
			x.ExitCode = "dumped"
		}
	default:
		x.ExitCode, x.ExitStatus = "exited", e.Code
	}
}

// Status returns the single number D-Bus and systemd-style tools report:
// the exit code, or the signal number for a child killed by a signal.
func (e ExitInfo) Status() int {
	if e.Signal != "" {
		return int(unix.SignalNum(e.Signal))
	}
	return e.Code
}

// ExitCode says how the child ended as systemd's EXIT_CODE= does:
// "exited", "killed" or "dumped"; "" when unknown.
func (e ExitInfo) ExitCode() string {
	switch {
	case !e.Known:
		return ""
	case e.Signal != "" && e.Dumped:
		return "dumped"
	case e.Signal != "":
		return "killed"
	}
	return "exited"
}

func exitInfo(state *os.ProcessState) ExitInfo {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = fmt.Sprintf("signal %d", int(ws.Signal()))
		}
		e := ExitInfo{Code: -1, Signal: name, Dumped: ws.CoreDump(), Known: true, Text: "killed by signal " + name}
		if e.Dumped {
			e.Text += " (core dumped)"
		}
		return e
	}
	return ExitInfo{Code: state.ExitCode(), Known: true, Text: fmt.Sprintf("exited with status %d", state.ExitCode())}
}
