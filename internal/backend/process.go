package backend

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

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
// its three standard streams connected to pipes owned by us.
type process struct {
	stdio
	cmd *exec.Cmd
	pid int
}

// spawn starts argv in its own process group. The child gets SIGKILL if the
// daemon dies, so a crashed or killed daemon never leaves it behind.
func spawn(argv []string, env []string, dir string) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	ours, theirs, err := newStdio()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs[0], theirs[1], theirs[2]
	err = cmd.Start()
	closeFiles(theirs[:])
	if err != nil {
		ours.close()
		return nil, err
	}
	return &process{stdio: ours, cmd: cmd, pid: cmd.Process.Pid}, nil
}

func (p *process) id() int          { return p.pid }
func (p *process) streams() *stdio  { return &p.stdio }
func (p *process) unitName() string { return "" }
func (p *process) usage() Usage     { return unknownUsage }

// signal sends sig to the child's whole process group.
func (p *process) signal(sig unix.Signal) error { return p.signalGroup(sig) }

// signalGroup sends sig to the child's whole process group. ESRCH (nothing
// left) is not an error.
func (p *process) signalGroup(sig unix.Signal) error {
	err := unix.Kill(-p.pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// kill sends SIGKILL to the group leader through its pidfd (os.Process uses
// one on Linux), so it never reaches another process that reuses the pid of
// a reaped child: it returns os.ErrProcessDone then. Reaping the leader
// kills the rest of its group (see wait).
func (p *process) kill() error {
	return p.cmd.Process.Signal(syscall.SIGKILL)
}

// wait reaps the group leader, kills whatever else is left in its group (the
// server is gone; its helpers are orphans now) and reaps those members that
// were reparented to us. The daemon is a child subreaper, so a double-forked
// grandchild in the group comes back to us rather than to init.
func (p *process) wait() ExitInfo {
	state, err := p.cmd.Process.Wait()
	_ = p.signalGroup(unix.SIGKILL)
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-p.pid, &ws, 0, nil); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			break // ECHILD: no member of the group is our child any more
		}
	}
	if err != nil {
		return ExitInfo{Code: -1, Text: "wait: " + err.Error()}
	}
	return exitInfo(state)
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
