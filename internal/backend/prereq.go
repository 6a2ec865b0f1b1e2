package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
)

// UnitWaiter waits until systemd units are active; see units.Watcher.
type UnitWaiter interface {
	// WaitActive returns once every unit is active, or ctx ended. waiting
	// is called with a unit and its state before each wait.
	WaitActive(ctx context.Context, units []string, waiting func(unit, state string)) error
}

// awaitPrerequisites waits for the backend's required units and its
// prerequisite process, at most prerequisite_timeout, while obeying
// commands as start does: a Stop need not wait for a unit.
func (s *supervision) awaitPrerequisites(ctx context.Context) error {
	b := s.b
	cfg := b.cfg
	if len(cfg.RequiresUnits) == 0 && cfg.Prerequisite == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.PrerequisiteTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.prerequisites(wctx) }()
	for {
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("prerequisites not ready within prerequisite_timeout (%s): %w", cfg.PrerequisiteTimeout, err)
			}
			return err
		case cmd := <-b.cmds:
			if cmd.op == opStart {
				s.waiters = append(s.waiters, cmd.done)
				continue
			}
			if cmd.op == opDetach {
				cmd.done <- errNotServing("it waits for its prerequisites")
				continue
			}
			cancel()
			<-done
			s.obey(cmd)
			return errCommand
		case <-ctx.Done():
			cancel()
			<-done
			return ctx.Err()
		}
	}
}

// prerequisites waits for the units, then starts the prerequisite process
// unless it runs already.
func (s *supervision) prerequisites(ctx context.Context) error {
	b := s.b
	cfg := b.cfg
	if len(cfg.RequiresUnits) > 0 {
		if b.opts.Units == nil {
			return errors.New("requires_units needs systemd's D-Bus API, which mcpgated cannot reach")
		}
		err := b.opts.Units.WaitActive(ctx, cfg.RequiresUnits, func(unit, state string) {
			b.update(func(st *Status) {
				st.LastError = fmt.Sprintf("waiting for unit %s to be active (it is %s)", unit, state)
				st.Cause = st.LastError
			})
			b.log.Info(fmt.Sprintf("backend %q: waiting for required unit %s (%s)", b.name, unit, state), "unit", unit, "unit_state", state)
		})
		if err != nil {
			return err
		}
	}
	p := cfg.Prerequisite
	if p == nil {
		return nil
	}
	if s.prereq != nil && s.prereq.pid.Load() != 0 {
		return nil // ours runs
	}
	if p.ProcessMatch != nil {
		if pid := matchingProcess(p.ProcessMatch); pid != 0 {
			b.log.Info(fmt.Sprintf("backend %q: prerequisite is running; starting nothing", b.name), "prerequisite_pid", pid, "process_match", p.ProcessMatch.String())
			return nil
		}
		if p.Command == "" {
			return fmt.Errorf("no process matches process_match %q", p.ProcessMatch)
		}
	}
	b.update(func(st *Status) {
		st.LastError, st.Cause = "starting its prerequisite "+p.Command, "starting its prerequisite"
	})
	if p.Managed {
		if s.prereq == nil {
			s.prereq = startManaged(b, p)
		}
	} else if err := runToCompletion(ctx, b, p); err != nil {
		return err
	}
	if p.StartupDelay > 0 {
		select {
		case <-time.After(p.StartupDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stopPrerequisite stops a managed prerequisite, process group and all.
func (s *supervision) stopPrerequisite() {
	if s.prereq != nil {
		s.prereq.stop()
		s.prereq = nil
	}
}

// matchingProcess returns the pid of a process whose command line (its
// arguments joined by spaces) matches re, or 0.
func matchingProcess(re *regexp.Regexp) int {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := os.Getpid()
	for _, p := range paths {
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue // gone, or a kernel thread
		}
		if re.Match(bytes.ReplaceAll(bytes.TrimRight(data, "\x00"), []byte{0}, []byte{' '})) {
			return pid
		}
	}
	return 0
}

// runToCompletion runs an unmanaged prerequisite's command, which starts
// the service and exits (as "systemctl start x" or "pg_ctl start" do).
func runToCompletion(ctx context.Context, b *Backend, p *config.Prerequisite) error {
	argv := append([]string{p.Command}, p.Args...)
	env, err := childEnv(b.cfg, b.opts)
	if err != nil {
		return fmt.Errorf("prerequisite %s: %w", p.Command, err)
	}
	proc, err := spawn(argv, env, b.cfg.Cwd, nil, b.opts.Spawn)
	if err != nil {
		return fmt.Errorf("prerequisite %s: %w", p.Command, err)
	}
	proc.stdin.Close()
	// The readers run until every process holding the pipes closed them:
	// a service the command started in the background may keep them, and
	// must never block on a full pipe.
	drain(proc, b.prerequisiteSink())
	exited := make(chan ExitInfo, 1)
	go func() { exited <- proc.waitLeader() }()
	var info ExitInfo
	select {
	case info = <-exited:
	case <-ctx.Done():
		_ = proc.signalGroup(unix.SIGKILL)
		info = <-exited
	}
	// What the command left running in its process group is now our
	// child (mcpgated is a child subreaper): reap each as it exits.
	go proc.reapGroup()
	if ctx.Err() != nil {
		return fmt.Errorf("prerequisite %s did not finish: %w", p.Command, ctx.Err())
	}
	if info.Code != 0 || info.Signal != "" {
		return fmt.Errorf("prerequisite %s %s", p.Command, info.Text)
	}
	return nil
}

// waitLeader reaps the command itself and nothing else: what it started in
// the background is the prerequisite and must keep running.
func (p *process) waitLeader() ExitInfo {
	state, err := p.osp.Wait()
	if err != nil {
		return ExitInfo{Code: -1, Text: "wait: " + err.Error()}
	}
	return exitInfo(state)
}

// reapGroup waits for the members of the process group that are our
// children until none is left.
func (p *process) reapGroup() {
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-p.pid, &ws, 0, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return // ECHILD: none left
		}
	}
}

// drain reads the process's stdout and stderr into sink until both close.
func drain(proc *process, sink LineSink) <-chan struct{} {
	done := make(chan struct{})
	r := newRing()
	go func() {
		defer close(done)
		out := make(chan struct{})
		go func() {
			defer close(out)
			readStderr(proc.stdout, proc.pid, r, sink)
		}()
		readStderr(proc.stderr, proc.pid, r, sink)
		<-out
		proc.stdout.Close()
		proc.stderr.Close()
	}()
	return done
}

func (b *Backend) prerequisiteSink() LineSink {
	if b.opts.PrerequisiteStderr != nil {
		return b.opts.PrerequisiteStderr
	}
	return logSink{b.log.With("prerequisite", true)}
}

// managedPrereq is a prerequisite mcpgate started and supervises: it is
// restarted with backoff when it exits, and stopped with the backend.
type managedPrereq struct {
	cancel context.CancelFunc
	done   chan struct{}
	pid    atomic.Int64 // 0 while not running
}

func startManaged(b *Backend, p *config.Prerequisite) *managedPrereq {
	ctx, cancel := context.WithCancel(context.Background())
	m := &managedPrereq{cancel: cancel, done: make(chan struct{})}
	go m.run(ctx, b, p)
	return m
}

// stop ends the prerequisite gracefully (SIGTERM to its process group,
// SIGKILL after the grace period) and returns once it is reaped.
func (m *managedPrereq) stop() {
	m.cancel()
	<-m.done
}

func (m *managedPrereq) run(ctx context.Context, b *Backend, p *config.Prerequisite) {
	defer close(m.done)
	argv := append([]string{p.Command}, p.Args...)
	backoff := b.cfg.RestartBackoffInitial
	for {
		started := time.Now()
		if m.once(ctx, b, argv) {
			return
		}
		if time.Since(started) > b.cfg.RestartWindow {
			backoff = b.cfg.RestartBackoffInitial // it ran stably
		}
		delay := jitter(backoff)
		backoff = min(2*backoff, b.cfg.RestartBackoffMax)
		b.log.Warn(fmt.Sprintf("backend %q: restarting the prerequisite in %s", b.name, delay.Round(time.Millisecond)), "in", delay.Round(time.Millisecond), "command", strings.Join(argv, " "))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// once runs the prerequisite until it exits or ctx ends; it reports
// whether ctx ended (and the prerequisite was stopped).
func (m *managedPrereq) once(ctx context.Context, b *Backend, argv []string) (stopped bool) {
	env, err := childEnv(b.cfg, b.opts)
	if err != nil {
		b.log.Warn(fmt.Sprintf("backend %q: cannot start the prerequisite: %v", b.name, err), "command", argv[0], journal.MessageStartFailed.Attr())
		return ctx.Err() != nil
	}
	proc, err := spawn(argv, env, b.cfg.Cwd, nil, b.opts.Spawn)
	if err != nil {
		b.log.Warn(fmt.Sprintf("backend %q: cannot start the prerequisite: %v", b.name, err), "command", argv[0], journal.MessageStartFailed.Attr())
		return ctx.Err() != nil
	}
	proc.stdin.Close()
	m.pid.Store(int64(proc.pid))
	defer m.pid.Store(0)
	b.log.Info(fmt.Sprintf("backend %q: started the prerequisite (pid %d)", b.name, proc.pid), "prerequisite_pid", proc.pid, "command", strings.Join(argv, " "), journal.MessageSpawn.Attr())
	drained := drain(proc, b.prerequisiteSink())
	exited := make(chan ExitInfo, 1)
	go func() { exited <- proc.wait() }()
	select {
	case info := <-exited:
		<-drained
		b.log.Warn(fmt.Sprintf("backend %q: the prerequisite exited: %s", b.name, info.Text), "prerequisite_pid", proc.pid)
		return false
	case <-ctx.Done():
		_ = proc.signalGroup(unix.SIGTERM)
		select {
		case <-exited:
		case <-time.After(b.opts.GracePeriod):
			_ = proc.signalGroup(unix.SIGKILL)
			<-exited
		}
		<-drained
		b.log.Info(fmt.Sprintf("backend %q: stopped the prerequisite", b.name), "prerequisite_pid", proc.pid)
		return true
	}
}
