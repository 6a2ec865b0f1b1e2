package unitrun

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// busTimeout bounds each call to systemd that has no caller's context.
const busTimeout = 30 * time.Second

// Instance is one run of a backend's unit: from the exec of its server to
// the unit's deactivation.
type Instance struct {
	r            *Runner
	unit         string
	path         dbus.ObjectPath
	pid          int
	invocationID []byte // this run's InvocationID, which tells it from the run before
	f            *follower
	unwatch      func()
}

// Exit is how a unit's run ended, as systemd saw it.
type Exit struct {
	// Result is systemd's Result= of the service: "success", "exit-code",
	// "signal", "core-dump", "oom-kill", "timeout", …
	Result string
	// Code is CLD_EXITED, CLD_KILLED or CLD_DUMPED (ExecMainCode), 0 when
	// the main process never ran.
	Code int32
	// Status is the exit status, or the signal number (ExecMainStatus).
	Status int32
	// Lost is set when the run could not be followed to its end (the bus
	// connection closed); the other fields are then zero.
	Lost bool
}

// OOM reports whether the kernel's OOM killer ended the run.
func (e Exit) OOM() bool { return e.Result == "oom-kill" }

// PID returns the server's process id (backend-exec's, which it replaced).
func (i *Instance) PID() int { return i.pid }

// Unit returns the unit's name.
func (i *Instance) Unit() string { return i.unit }

// Wait returns once the unit's run has ended, its cgroup empty.
func (i *Instance) Wait() Exit {
	defer i.unwatch()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
		exit, ended, err := i.ended(ctx, i.invocationID)
		cancel()
		if err == nil && ended {
			return exit
		}
		if _, ok := <-i.f.changed; !ok {
			return Exit{Lost: true}
		}
	}
}

// ended reports whether the unit's run with InvocationID id is over, and
// how it ended: from the unit while systemd has it loaded, else from the
// last signals it sent.
func (i *Instance) ended(ctx context.Context, id []byte) (Exit, bool, error) {
	u := i.r.bus.Object(systemdName, i.path)
	var unit map[string]dbus.Variant
	err := u.CallWithContext(ctx, propertiesIface+".GetAll", 0, unitIface).Store(&unit)
	if err == nil && over(id, unit["InvocationID"], unit["ActiveState"]) {
		var svc map[string]dbus.Variant
		if err := u.CallWithContext(ctx, propertiesIface+".GetAll", 0, serviceIface).Store(&svc); err != nil {
			return Exit{}, false, err
		}
		return exitOf(svc["Result"], svc["ExecMainCode"], svc["ExecMainStatus"]), true, nil
	}
	// Unloaded once inactive: it reads as a fresh unit now.
	lastID, _ := i.f.last("InvocationID")
	state, _ := i.f.last("ActiveState")
	if !over(id, lastID, state) {
		return Exit{}, false, err
	}
	result, _ := i.f.last("Result")
	code, _ := i.f.last("ExecMainCode")
	status, _ := i.f.last("ExecMainStatus")
	return exitOf(result, code, status), true, nil
}

// over reports whether a unit's InvocationID and ActiveState say that
// the run with InvocationID id has ended.
func over(id []byte, invocation, state dbus.Variant) bool {
	b, _ := invocation.Value().([]byte)
	s, _ := state.Value().(string)
	return bytes.Equal(b, id) && (s == "inactive" || s == "failed")
}

func exitOf(result, code, status dbus.Variant) Exit {
	var e Exit
	e.Result, _ = result.Value().(string)
	e.Code, _ = code.Value().(int32)
	e.Status, _ = status.Value().(int32)
	return e
}

// invocation returns the unit's current InvocationID (empty before its
// first start).
func (i *Instance) invocation(ctx context.Context) ([]byte, error) {
	var v dbus.Variant
	if err := i.r.bus.Object(systemdName, i.path).CallWithContext(ctx, propertiesIface+".Get", 0, unitIface, "InvocationID").Store(&v); err != nil {
		return nil, fmt.Errorf("unit %s: %w", i.unit, err)
	}
	id, _ := v.Value().([]byte)
	return id, nil
}

// failedStart reports why a start that replaced the run with InvocationID
// before failed, or "" while it has not.
func (i *Instance) failedStart(ctx context.Context, before []byte) string {
	var unit map[string]dbus.Variant
	if err := i.r.bus.Object(systemdName, i.path).CallWithContext(ctx, propertiesIface+".GetAll", 0, unitIface).Store(&unit); err != nil {
		return ""
	}
	id, _ := unit["InvocationID"].Value().([]byte)
	if len(id) == 0 || bytes.Equal(id, before) {
		return "" // not started yet, or the run it replaces
	}
	exit, ended, _ := i.ended(ctx, id)
	if !ended {
		return ""
	}
	return fmt.Sprintf("%s (see journalctl -u %s)", exit.Describe(), i.unit)
}

// Describe says how the run ended, in the words of an exit status.
func (e Exit) Describe() string {
	switch {
	case e.Lost:
		return "ended (lost track of its unit: the bus connection closed)"
	case e.OOM():
		return "killed by the OOM killer (its memory_max)"
	case e.Code == 1: // CLD_EXITED
		return fmt.Sprintf("exited with status %d", e.Status)
	case e.Code == 2 || e.Code == 3: // CLD_KILLED, CLD_DUMPED
		s := "killed by signal " + unix.SignalName(unix.Signal(e.Status))
		if e.Code == 3 {
			s += " (core dumped)"
		}
		return s
	}
	return "ended with result " + e.Result
}

// Stop asks systemd to stop the unit: SIGTERM to everything in it, SIGKILL
// after its TimeoutStopSec=. It does not wait; Wait does.
func (i *Instance) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
	defer cancel()
	err := i.r.bus.Object(systemdName, systemdPath).CallWithContext(ctx, managerIface+".StopUnit", 0, i.unit, "replace").Err
	if err != nil {
		return fmt.Errorf("stop %s: %w", i.unit, explain(err))
	}
	return nil
}

// Usage is what a unit's cgroup uses now; math.MaxUint64 where systemd
// does not account for it.
type Usage struct {
	MemoryCurrent, TasksCurrent, CPUUsageNSec uint64
}

// Usage reads the unit's accounting from systemd.
func (i *Instance) Usage(ctx context.Context) (Usage, error) {
	u := Usage{math.MaxUint64, math.MaxUint64, math.MaxUint64}
	o := i.r.bus.Object(systemdName, i.path)
	for name, dst := range map[string]*uint64{"MemoryCurrent": &u.MemoryCurrent, "TasksCurrent": &u.TasksCurrent, "CPUUsageNSec": &u.CPUUsageNSec} {
		var v dbus.Variant
		if err := o.CallWithContext(ctx, propertiesIface+".Get", 0, serviceIface, name).Store(&v); err != nil {
			return u, fmt.Errorf("unit %s: %w", i.unit, err)
		}
		if n, ok := v.Value().(uint64); ok {
			*dst = n
		}
	}
	return u, nil
}
