package backend

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/handoff"
	"github.com/mcpgate/mcpgate/internal/unitrun"
	"github.com/mcpgate/mcpgate/internal/unitrun/wire"
)

// startChild starts the backend's server with the runner its configuration
// names: as our own child, or as a systemd unit of its own.
func (b *Backend) startChild(argv, env []string) (child, error) {
	if !b.cfg.UnitRunner() {
		group, err := b.newCgroup()
		if err != nil {
			return nil, err
		}
		proc, err := spawn(argv, env, b.cfg.Cwd, group, b.opts.Spawn)
		if err != nil {
			return nil, fmt.Errorf("spawn %s: %w", b.cfg.Command, err)
		}
		return proc, nil
	}
	if b.opts.UnitRunner == nil {
		return nil, fmt.Errorf(`runner = "unit": the gateway started without a backend that used it, so it has no connection to systemd; restart the gateway (systemctl restart mcpgate)`)
	}
	return b.startUnit(argv)
}

// UnitName returns the systemd unit the backend's server runs in under
// runner = "unit", or "": also for a pool, whose instances each have
// their own (NAME-N).
func (b *Backend) UnitName() string {
	if !b.cfg.UnitRunner() || b.cfg.Pooled() && b.opts.Instance == 0 {
		return ""
	}
	return unitrun.UnitName(b.name, b.opts.Instance)
}

// unitChild is a server that systemd runs in mcpgate-backend@NAME.service.
type unitChild struct {
	stdio
	inst *unitrun.Instance
	// detached is set once the server is handed to the next mcpgated (see
	// Backend.Detach): nothing of this one stops its unit any more.
	detached atomic.Bool
}

// attachUnit follows the unit a previous mcpgated handed on, with our ends
// of its server's pipes.
func (b *Backend) attachUnit(ctx context.Context, rec handoff.Backend, streams stdio) (*unitChild, error) {
	if rec.Unit != b.UnitName() {
		return nil, fmt.Errorf("unit %s is not the backend's %s", rec.Unit, b.UnitName())
	}
	inst, err := b.opts.UnitRunner.Attach(ctx, rec.Unit, rec.PID, rec.Invocation)
	if err != nil {
		return nil, err
	}
	return &unitChild{stdio: streams, inst: inst}, nil
}

// startUnit starts the backend's unit and hands it the server: argv, the
// variables of env the unit does not set itself (the configured env and
// inherit_env: HOME, PATH and the caches are the unit's), and the pipes.
func (b *Backend) startUnit(argv []string) (*unitChild, error) {
	env, err := unitEnv(b.cfg, b.opts)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(argv[0], "/") {
		// Resolved here, as the process runner and --check-config do.
		if argv[0], err = exec.LookPath(argv[0]); err != nil {
			return nil, fmt.Errorf("spawn %s: %w", b.cfg.Command, err)
		}
	}
	ours, theirs, err := newStdio()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	inst, err := b.opts.UnitRunner.Start(ctx, b.UnitName(), wire.Spec{Argv: argv, Env: env, Dir: b.cfg.Cwd}, theirs, b.cfg.UnitProperties())
	closeFiles(theirs[:])
	if err != nil {
		ours.close()
		return nil, err
	}
	return &unitChild{stdio: ours, inst: inst}, nil
}

func (u *unitChild) id() int          { return u.inst.PID() }
func (u *unitChild) streams() *stdio  { return &u.stdio }
func (u *unitChild) unitName() string { return u.inst.Unit() }

// signal stops the unit, whatever sig: systemd sends SIGTERM to all of it
// and SIGKILL after the unit's TimeoutStopSec=.
func (u *unitChild) signal(unix.Signal) error {
	if u.detached.Load() {
		return nil
	}
	return u.inst.Stop()
}

func (u *unitChild) kill() error {
	if u.detached.Load() {
		return nil
	}
	return u.inst.Stop()
}

func (u *unitChild) usage() Usage {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := u.inst.Usage(ctx)
	if err != nil {
		return unknownUsage
	}
	return Usage(got)
}

func (u *unitChild) wait() ExitInfo { return unitExit(u.inst.Wait()) }

// unitExit is how a unit's run ended, as the backend reports exits.
func unitExit(e unitrun.Exit) ExitInfo {
	info := ExitInfo{Code: -1, Text: e.Describe(), OOM: e.OOM()}
	switch e.Code {
	case 1: // CLD_EXITED
		info.Code, info.Known = int(e.Status), true
	case 2, 3: // CLD_KILLED, CLD_DUMPED
		info.Signal, info.Dumped, info.Known = unix.SignalName(unix.Signal(e.Status)), e.Code == 3, true
	}
	return info
}

// newCgroup makes the cgroup of a new child under the process runner: one
// of its own, backend-NAME (backend-NAME@N for a pool's instance N: "@"
// is in no backend name, so backend "a-1" and instance 1 of "a" differ),
// with the backend's limits; nil when the daemon has no delegated cgroup.
// A backend with limits needs one.
func (b *Backend) newCgroup() (*cgroup.Group, error) {
	if b.opts.Cgroups == nil {
		if b.cfg.Limited() {
			return nil, fmt.Errorf("the backend's resource limits need a cgroup delegated to mcpgated, and it has none; %s", cgroup.HowToDelegate)
		}
		return nil, nil
	}
	name := b.name
	if l := b.instanceLabel(); l != "" {
		name += "@" + l
	}
	g, err := b.opts.Cgroups.New(name, b.cfg.Resources)
	if err != nil {
		return nil, fmt.Errorf("cgroup of %s: %w", b.cfg.Command, err)
	}
	return g, nil
}
