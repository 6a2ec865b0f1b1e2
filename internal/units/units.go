// Package units waits for systemd units to become active, watching their ActiveState over D-Bus (PropertiesChanged, never polling).
package units

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/godbus/dbus/v5"
)

// systemd's names on D-Bus, shared with package unitrun.
const (
	SystemdName         = "org.freedesktop.systemd1"
	SystemdPath         = "/org/freedesktop/systemd1"
	ManagerInterface    = "org.freedesktop.systemd1.Manager"
	UnitInterface       = "org.freedesktop.systemd1.Unit"
	ServiceInterface    = "org.freedesktop.systemd1.Service"
	PropertiesInterface = "org.freedesktop.DBus.Properties"
)

// Watcher waits for units of one systemd instance (the system manager on
// the system bus, a user manager on the session bus). It is safe for
// concurrent use; each WaitActive has its own signal channel.
type Watcher struct {
	conn *dbus.Conn

	once   sync.Once
	subErr error
}

// New returns a watcher on conn, which the caller keeps owning.
func New(conn *dbus.Conn) *Watcher {
	return &Watcher{conn: conn}
}

// subscribe asks systemd to emit unit signals at all (it sends them only
// while someone is subscribed), once.
func (w *Watcher) subscribe() error {
	w.once.Do(func() {
		w.subErr = w.conn.Object(SystemdName, SystemdPath).Call(ManagerInterface+".Subscribe", 0).Err
	})
	return w.subErr
}

// WaitActive returns once every unit is active, or when ctx ends. For each
// unit that is not active yet, waiting is called with its name and state
// first. A unit that fails (ActiveState "failed") is waited for all the
// same: it may be restarted.
func (w *Watcher) WaitActive(ctx context.Context, units []string, waiting func(unit, state string)) error {
	if err := w.subscribe(); err != nil {
		return fmt.Errorf("subscribe to systemd's unit signals: %w", err)
	}
	for _, unit := range units {
		if err := w.waitOne(ctx, unit, waiting); err != nil {
			return err
		}
	}
	return nil
}

func (w *Watcher) waitOne(ctx context.Context, unit string, waiting func(unit, state string)) error {
	var path dbus.ObjectPath
	if err := w.conn.Object(SystemdName, SystemdPath).CallWithContext(ctx, ManagerInterface+".LoadUnit", 0, unit).Store(&path); err != nil {
		return fmt.Errorf("unit %s: %w", unit, err)
	}
	match := []dbus.MatchOption{
		dbus.WithMatchObjectPath(path),
		dbus.WithMatchInterface(PropertiesInterface),
		dbus.WithMatchMember("PropertiesChanged"),
	}
	if err := w.conn.AddMatchSignalContext(ctx, match...); err != nil {
		return fmt.Errorf("watch unit %s: %w", unit, err)
	}
	defer w.conn.RemoveMatchSignalContext(context.WithoutCancel(ctx), match...)
	signals := make(chan *dbus.Signal, 16)
	w.conn.Signal(signals)
	defer w.conn.RemoveSignal(signals)

	// Read the state only once subscribed, so no change falls between.
	state, err := w.activeState(ctx, path)
	if err != nil {
		return fmt.Errorf("unit %s: %w", unit, err)
	}
	for state != "active" {
		waiting(unit, state)
		select {
		case <-ctx.Done():
			return fmt.Errorf("unit %s is %s: %w", unit, state, ctx.Err())
		case sig, ok := <-signals:
			if !ok {
				return errors.New("the bus connection closed")
			}
			if sig.Path != path || len(sig.Body) < 2 {
				continue
			}
			if iface, _ := sig.Body[0].(string); iface != UnitInterface {
				continue
			}
			changed, _ := sig.Body[1].(map[string]dbus.Variant)
			if v, ok := changed["ActiveState"]; ok {
				if s, ok := v.Value().(string); ok {
					state = s
				}
			}
		}
	}
	return nil
}

func (w *Watcher) activeState(ctx context.Context, path dbus.ObjectPath) (string, error) {
	var v dbus.Variant
	if err := w.conn.Object(SystemdName, path).CallWithContext(ctx, PropertiesInterface+".Get", 0, UnitInterface, "ActiveState").Store(&v); err != nil {
		return "", err
	}
	s, _ := v.Value().(string)
	return s, nil
}
