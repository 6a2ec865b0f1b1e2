package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/unitrun"
	"github.com/mcpgate/mcpgate/internal/unitrun/wire"
)

// usesUnits reports whether some backend runs, or may after a reload run,
// as a systemd unit of its own.
func usesUnits(cfg *config.Config) bool {
	if cfg.Gateway.Runner == config.RunnerUnit {
		return true
	}
	for _, b := range cfg.Backends {
		if b.UnitRunner() {
			return true
		}
	}
	return false
}

// unitNames returns the units of the enabled backends with runner =
// "unit" (a pool's first instance stands for its others).
func unitNames(cfg *config.Config) []string {
	var names []string
	for _, b := range cfg.EnabledBackends() {
		if b.UnitRunner() {
			first := 0
			if b.Pooled() {
				first = 1
			}
			names = append(names, unitrun.UnitName(b.Name, first))
		}
	}
	return names
}

// checkUnits connects to systemd and checks that the units of the
// configuration's enabled backends can run (unitrun.Check); for
// --check-config.
func checkUnits(ctx context.Context, cfg *config.Config) error {
	names := unitNames(cfg)
	if len(names) == 0 {
		return nil
	}
	conn, err := systemBus(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return unitrun.Check(ctx, conn, names)
}

// systemBus connects to the system manager's bus for the unit runner.
func systemBus(ctx context.Context) (*dbus.Conn, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("runner = \"unit\": cannot reach systemd on the system bus: %w", err)
	}
	return conn, nil
}

// startUnitRunner connects to systemd and listens for the backend units'
// backend-exec, when the configuration uses units; stop ends both once the
// backends are stopped.
func (d *daemon) startUnitRunner(ctx context.Context) (stop func(), err error) {
	if !usesUnits(d.cfg) {
		return func() {}, nil
	}
	conn, err := systemBus(ctx)
	if err != nil {
		return nil, err
	}
	if err := unitrun.Check(ctx, conn, unitNames(d.cfg)); err != nil {
		conn.Close()
		return nil, err
	}
	r, err := unitrun.New(conn, wire.Socket, d.log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	d.runner = r
	return func() {
		r.Close()
		conn.Close()
	}, nil
}

// resetUnusedUnits resets the failed state of the backend units that no
// backend of the configuration uses any more (unitrun.ResetFailed), so
// that a removed backend's last failure does not stay in "systemctl
// --failed" for good, and journals which.
func (d *daemon) resetUnusedUnits(ctx context.Context) {
	if d.runner == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reset, err := d.runner.ResetFailed(ctx, func(unit string) bool {
		for _, b := range d.cfg.Backends {
			if b.UnitRunner() && unitrun.Claims(b.Name, b.Pooled(), unit) {
				return true
			}
		}
		return false
	})
	if len(reset) > 0 {
		d.log.Info("reset the failed state of " + strings.Join(reset, ", ") + ": no configured backend uses it any more")
	}
	if err != nil {
		d.log.Warn("cannot reset the failed state of backend units no backend uses: " + err.Error())
	}
}
