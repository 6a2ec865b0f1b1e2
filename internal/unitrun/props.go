package unitrun

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/config"
)

// controlDir is where systemd keeps what SetUnitProperties(runtime) set,
// one drop-in per setting, until reboot.
const controlDir = "/run/systemd/system.control"

// limitProperties are the unit properties mcpgate sets, by the name of the
// drop-in systemd writes for them (50-NAME.conf), with the property and
// value that undo them.
var limitProperties = map[string]struct {
	property string
	unset    string // the drop-in's setting once undone
}{
	"MemoryMax":  {"MemoryMax", "MemoryMax=infinity"},
	"MemoryHigh": {"MemoryHigh", "MemoryHigh=infinity"},
	"TasksMax":   {"TasksMax", ""}, // the manager's DefaultTasksMax
	"CPUWeight":  {"CPUWeight", "CPUWeight="},
	"CPUQuota":   {"CPUQuotaPerSecUSec", "CPUQuota="},
	"IOWeight":   {"IOWeight", "IOWeight="},
}

// withResets returns props plus the properties that undo the limits an
// earlier start set on unit and the configuration no longer has: systemd
// keeps them until reboot. Limits nobody set are not touched, so an
// operator's drop-in stays in charge of them.
func (r *Runner) withResets(ctx context.Context, unit string, props []config.UnitProperty) []config.UnitProperty {
	out := props
	for file, p := range limitProperties {
		if setNow(props, p.property) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(controlDir, unit+".d", "50-"+file+".conf"))
		if err != nil {
			continue // never set, or not ours to read
		}
		value := any(uint64(math.MaxUint64))
		if file == "TasksMax" {
			var v dbus.Variant
			if err := r.bus.Object(systemdName, systemdPath).CallWithContext(ctx, propertiesIface+".Get", 0, managerIface, "DefaultTasksMax").Store(&v); err != nil {
				continue
			}
			n, _ := v.Value().(uint64)
			value, p.unset = n, "TasksMax="+formatTasks(n)
		}
		if strings.Contains(string(data), "\n"+p.unset+"\n") {
			continue // undone already
		}
		out = append(out, config.UnitProperty{Name: p.property, Value: value})
	}
	return out
}

func setNow(props []config.UnitProperty, name string) bool {
	for _, p := range props {
		if p.Name == name || p.Name == name+"Scale" {
			return true
		}
	}
	return false
}

func formatTasks(n uint64) string {
	if n == math.MaxUint64 {
		return "infinity"
	}
	return strconv.FormatUint(n, 10)
}
