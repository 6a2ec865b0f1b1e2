package daemon

import (
	"context"
	"fmt"
	"sync"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/units"
)

// lazyUnits connects to systemd on D-Bus when a backend first waits for a
// unit: most configurations need no such connection. It watches the system
// manager, or the user's manager when the gateway uses the session bus.
type lazyUnits struct {
	session bool

	mu      sync.Mutex
	conn    *dbus.Conn
	watcher *units.Watcher
}

// WaitActive implements backend.UnitWaiter.
func (l *lazyUnits) WaitActive(ctx context.Context, names []string, waiting func(unit, state string)) error {
	w, err := l.get()
	if err != nil {
		return err
	}
	return w.WaitActive(ctx, names, waiting)
}

func (l *lazyUnits) get() (*units.Watcher, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watcher != nil {
		return l.watcher, nil
	}
	connect, bus := dbus.ConnectSystemBus, "system"
	if l.session {
		connect, bus = dbus.ConnectSessionBus, "session"
	}
	conn, err := connect()
	if err != nil {
		return nil, fmt.Errorf("requires_units: cannot reach systemd on the %s bus: %w", bus, err)
	}
	l.conn, l.watcher = conn, units.New(conn)
	return l.watcher, nil
}

func (l *lazyUnits) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close()
	}
}

// prerequisiteSink is the journal sink of a backend's prerequisite process:
// the backend's fields plus MCPGATE_PREREQUISITE=1.
func (d *daemon) prerequisiteSink(cfg *config.Backend) pidSink {
	sink := journal.NewBackendLog(d.output.Writer, journal.BackendLogOptions{
		Backend:      cfg.Name,
		Prerequisite: true,
		RateLimit:    journal.RateLimit{Burst: cfg.LogRateLimit.Burst, Interval: cfg.LogRateLimit.Interval},
		ErrorLog:     d.log,
	})
	d.sinksMu.Lock()
	d.prereqSinks[cfg] = sink
	d.sinksMu.Unlock()
	return pidSink{sink}
}
