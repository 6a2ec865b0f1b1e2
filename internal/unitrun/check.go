package unitrun

import (
	"context"
	"fmt"
	"os"

	"github.com/godbus/dbus/v5"
)

// Check reports why units could not run here, or nil: the template must
// be installed, and systemd must let this process manage each unit (root
// may; anyone else needs the package's polkit rule). The permission is
// tried with a SetUnitProperties that sets nothing: systemd asks polkit
// about it like about the rest, and it changes nothing.
func Check(ctx context.Context, bus *dbus.Conn, units []string) error {
	manager := bus.Object(systemdName, systemdPath)
	for _, unit := range units {
		if _, err := load(ctx, bus, unit); err != nil {
			return fmt.Errorf("runner = \"unit\": %w", err)
		}
		if os.Geteuid() == 0 {
			continue
		}
		none := []struct {
			Name  string
			Value dbus.Variant
		}{}
		if err := manager.CallWithContext(ctx, managerIface+".SetUnitProperties", 0, unit, true, none).Err; err != nil {
			return fmt.Errorf("runner = \"unit\": systemd does not let this user manage %s: %w", unit, explain(err))
		}
	}
	return nil
}

// load loads unit, an instance of Template, and returns its object path;
// an error says when the template is not installed.
func load(ctx context.Context, bus *dbus.Conn, unit string) (dbus.ObjectPath, error) {
	var path dbus.ObjectPath
	if err := bus.Object(systemdName, systemdPath).CallWithContext(ctx, managerIface+".LoadUnit", 0, unit).Store(&path); err != nil {
		return "", fmt.Errorf("cannot ask systemd about %s: %w", unit, err)
	}
	var state dbus.Variant
	if err := bus.Object(systemdName, path).CallWithContext(ctx, propertiesIface+".Get", 0, unitIface, "LoadState").Store(&state); err != nil {
		return "", fmt.Errorf("cannot ask systemd about %s: %w", unit, err)
	}
	if s, _ := state.Value().(string); s != "loaded" {
		return "", fmt.Errorf("%s is %s: the template %s is not installed (it comes with the mcpgate package); install it, or set runner = \"process\"", unit, s, Template)
	}
	return path, nil
}
