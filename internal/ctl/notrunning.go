package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/units"
)

// unitStates is what the service manager says of mcpgate's units when the
// gateway is not on the bus. A state is "" when it is not known.
type unitStates struct {
	socket        string   // mcpgate.socket's ActiveState
	listen        []string // where it listens
	service       string   // mcpgate.service's ActiveState
	serviceSub    string   // its SubState
	serviceResult string   // its Result
}

// askSystemd asks the service manager on the bus (the system's, or the
// user's with user) about mcpgate.socket and mcpgate.service; ok is false
// when it cannot be asked or knows neither unit.
func askSystemd(user bool) (s unitStates, ok bool) {
	connect := dbus.ConnectSystemBus
	if user {
		connect = dbus.ConnectSessionBus
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := connect(dbus.WithContext(ctx))
	if err != nil {
		return s, false
	}
	defer conn.Close()
	get := func(unit, iface, prop string) (dbus.Variant, bool) {
		var path dbus.ObjectPath
		if err := conn.Object(units.SystemdName, units.SystemdPath).CallWithContext(ctx, units.ManagerInterface+".LoadUnit", 0, unit).Store(&path); err != nil {
			return dbus.Variant{}, false
		}
		var v dbus.Variant
		if err := conn.Object(units.SystemdName, path).CallWithContext(ctx, units.PropertiesInterface+".Get", 0, iface, prop).Store(&v); err != nil {
			return dbus.Variant{}, false
		}
		return v, true
	}
	str := func(unit, iface, prop string) string {
		v, _ := get(unit, iface, prop)
		s, _ := v.Value().(string)
		return s
	}
	if str("mcpgate.socket", units.UnitInterface, "LoadState") != "loaded" || str("mcpgate.service", units.UnitInterface, "LoadState") != "loaded" {
		return s, false
	}
	s.socket = str("mcpgate.socket", units.UnitInterface, "ActiveState")
	if v, ok := get("mcpgate.socket", "org.freedesktop.systemd1.Socket", "Listen"); ok {
		var listen [][]any
		if v.Store(&listen) == nil {
			for _, l := range listen {
				if len(l) == 2 {
					if addr, ok := l[1].(string); ok {
						s.listen = append(s.listen, addr)
					}
				}
			}
		}
	}
	s.service = str("mcpgate.service", units.UnitInterface, "ActiveState")
	s.serviceSub = str("mcpgate.service", units.UnitInterface, "SubState")
	s.serviceResult = str("mcpgate.service", units.ServiceInterface, "Result")
	return s, true
}

// describeNotRunning says why the gateway is not on bus, from the states
// of its units, and what to do about it; "" when they say nothing more
// than "not running".
func describeNotRunning(s unitStates, bus string, user bool) string {
	systemctl := "systemctl"
	if user {
		systemctl = "systemctl --user"
	}
	listening := "mcpgate.socket is listening"
	if len(s.listen) > 0 {
		listening += " on " + strings.Join(s.listen, " and ")
	}
	switch {
	case s.service == "activating" || s.service == "reloading":
		return fmt.Sprintf("mcpgate is not on the %s bus yet: mcpgate.service is %s (%s), and its name comes on the bus once its backends are ready; try again in a moment", bus, s.service, s.serviceSub)
	case s.service == "deactivating":
		return fmt.Sprintf("mcpgate is not on the %s bus: mcpgate.service is stopping", bus)
	case s.service == "failed" && s.socket == "active":
		return fmt.Sprintf("mcpgate is not running on the %s bus: mcpgate.service failed (result %s), see %q and \"journalctl -u mcpgate\"; %s, and the next connection to it, or %q, starts the daemon again",
			bus, s.serviceResult, systemctl+" status mcpgate", listening, systemctl+" start mcpgate")
	case s.service == "failed":
		return fmt.Sprintf("mcpgate is not running on the %s bus: mcpgate.service failed (result %s), see %q and \"journalctl -u mcpgate\"", bus, s.serviceResult, systemctl+" status mcpgate")
	case s.service == "inactive" && s.socket == "active":
		return fmt.Sprintf("mcpgate is not running on the %s bus yet: %s, and the first connection to it, or %q, starts the daemon", bus, listening, systemctl+" start mcpgate")
	case s.service == "inactive" && s.socket != "":
		return fmt.Sprintf("mcpgate is not running on the %s bus, and mcpgate.socket is not listening (it is %s): %q listens again, and %q starts the daemon", bus, s.socket, systemctl+" start mcpgate.socket", systemctl+" start mcpgate")
	}
	return ""
}
