package unitrun

import (
	"bytes"
	"context"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// Attach follows a unit whose server a previous mcpgated started and
// handed across its re-exec: the run with InvocationID invocation, whose
// main process is pid. It fails, and follows nothing, when the unit is no
// longer that run (it ended, or was started again meanwhile).
func (r *Runner) Attach(ctx context.Context, unit string, pid int, invocation []byte) (*Instance, error) {
	path, err := load(ctx, r.bus, unit)
	if err != nil {
		return nil, err
	}
	f, unwatch, err := r.watch(path)
	if err != nil {
		return nil, err
	}
	// Watched first: an end after the check below is seen by Wait.
	var props map[string]dbus.Variant
	if err := r.bus.Object(systemdName, path).CallWithContext(ctx, propertiesIface+".GetAll", 0, unitIface).Store(&props); err != nil {
		unwatch()
		return nil, fmt.Errorf("unit %s: %w", unit, err)
	}
	id, _ := props["InvocationID"].Value().([]byte)
	state, _ := props["ActiveState"].Value().(string)
	var main dbus.Variant
	if err := r.bus.Object(systemdName, path).CallWithContext(ctx, propertiesIface+".Get", 0, serviceIface, "MainPID").Store(&main); err != nil {
		unwatch()
		return nil, fmt.Errorf("unit %s: %w", unit, err)
	}
	mainPID, _ := main.Value().(uint32)
	switch {
	case !bytes.Equal(id, invocation):
		unwatch()
		return nil, fmt.Errorf("unit %s was started again meanwhile", unit)
	case state != "active" || int(mainPID) != pid:
		unwatch()
		return nil, fmt.Errorf("unit %s is %s with main PID %d, not the run of PID %d", unit, state, mainPID, pid)
	}
	return &Instance{r: r, unit: unit, path: path, pid: pid, invocationID: invocation, f: f, unwatch: unwatch}, nil
}

// InvocationID returns the run's InvocationID, which Attach checks.
func (i *Instance) InvocationID() []byte { return i.invocationID }

// StopUnit stops unit: a run handed across a re-exec that no backend took
// over, whose server is of no use without its pipes.
func (r *Runner) StopUnit(unit string) error {
	ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
	defer cancel()
	if err := r.bus.Object(systemdName, systemdPath).CallWithContext(ctx, managerIface+".StopUnit", 0, unit, "replace").Err; err != nil {
		return fmt.Errorf("stop %s: %w", unit, explain(err))
	}
	return nil
}
