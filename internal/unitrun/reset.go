package unitrun

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/godbus/dbus/v5"
)

// Claims reports whether unit is the unit of backend name (runner =
// "unit"), or, when pooled, of one of its instances (NAME-N). A pool's
// instance whose name is hashed (InstanceName) is claimed by every pool
// whose name starts the same: an instance of a pool is never taken for a
// stranger's.
func Claims(name string, pooled bool, unit string) bool {
	instance, ok := strings.CutPrefix(unit, "mcpgate-backend@")
	if !ok {
		return false
	}
	instance, ok = strings.CutSuffix(instance, ".service")
	if !ok {
		return false
	}
	if instance == InstanceName(name) {
		return true
	}
	if !pooled {
		return false
	}
	if n, ok := strings.CutPrefix(instance, name+"-"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		return true
	}
	// A shortened instance name starts with what it keeps of NAME-N, of
	// which NAME's part is all we know.
	prefix := head(name)
	if len(prefix) > 14 {
		prefix = prefix[:14]
	}
	return hashedInstance.MatchString(instance) && strings.HasPrefix(instance, prefix)
}

// hashedInstance matches an instance name InstanceName shortened.
var hashedInstance = regexp.MustCompile(`-[0-9a-f]{8}$`)

// ResetFailed resets the failed state of every backend unit that is
// failed and that inUse does not claim, and returns their names: a unit
// of a backend removed from the configuration would otherwise stay in
// "systemctl --failed" until reboot, since nothing starts it again. The
// package's polkit rule lets user mcpgate reset-failed these units.
func (r *Runner) ResetFailed(ctx context.Context, inUse func(unit string) bool) ([]string, error) {
	var listed []struct {
		Name, Description, LoadState, ActiveState, SubState, Following string
		Path                                                           dbus.ObjectPath
		JobID                                                          uint32
		JobType                                                        string
		JobPath                                                        dbus.ObjectPath
	}
	manager := r.bus.Object(systemdName, systemdPath)
	if err := manager.CallWithContext(ctx, managerIface+".ListUnitsByPatterns", 0, []string{"failed"}, []string{"mcpgate-backend@*.service"}).Store(&listed); err != nil {
		return nil, fmt.Errorf("list the failed backend units: %w", err)
	}
	var reset []string
	for _, u := range listed {
		if inUse(u.Name) {
			continue
		}
		if err := manager.CallWithContext(ctx, managerIface+".ResetFailedUnit", 0, u.Name).Err; err != nil {
			return reset, fmt.Errorf("reset-failed %s: %w", u.Name, explain(err))
		}
		reset = append(reset, u.Name)
	}
	return reset, nil
}
