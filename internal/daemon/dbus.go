package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/supervisor"
)

// startDBus exports the control interface on D-Bus, unless [gateway] bus is
// "none". The returned function releases the bus name and disconnects.
//
// A bus that cannot be reached, or whose policy does not let us own the
// name, only costs the control interface: the gateway serves MCP all the
// same, with a warning. A name that another process owns is fatal: that is
// a second gateway, and mcpgatectl and systemctl reload would silently
// control the other one.
func (d *daemon) startDBus(ctx context.Context) (stop func(), err error) {
	nothing := func() {}
	bus := d.cfg.Gateway.Bus
	if bus == "none" {
		return nothing, nil
	}
	var conn *dbus.Conn
	if bus == "session" {
		conn, err = dbus.ConnectSessionBus(dbus.WithContext(ctx))
	} else {
		conn, err = dbus.ConnectSystemBus(dbus.WithContext(ctx))
	}
	if err != nil {
		d.log.Warn("running without the D-Bus control interface: cannot connect to the "+bus+" bus", "err", err)
		return nothing, nil
	}
	api := &dbusGateway{d: d}
	srv, err := dbusapi.NewServer(conn, api, dbusapi.Options{
		Authorizer: dbusapi.NewBusAuthorizer(conn, bus == "system"),
		Logger:     d.log,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	stop = func() {
		srv.Close()
		conn.Close()
	}
	names := make([]string, 0, len(d.cfg.Backends))
	for name := range d.cfg.Backends {
		names = append(names, name)
	}
	sort.Strings(names)
	if err := srv.Export(names); err != nil {
		stop()
		return nil, fmt.Errorf("D-Bus: %w", err)
	}
	if err := srv.RequestName(); err != nil {
		stop()
		if errors.Is(err, dbusapi.ErrNameTaken) {
			return nil, fmt.Errorf("D-Bus (%s bus): %w; stop it, or set [gateway] bus = \"none\" for this instance", bus, err)
		}
		d.log.Warn("running without the D-Bus control interface", "bus", bus, "err", err)
		return nothing, nil
	}
	d.onChange = append(d.onChange, func(*backend.Backend) { srv.Changed() })
	d.onCalls = append(d.onCalls, func(*backend.Backend) { srv.Changed() })
	d.onSessions = append(d.onSessions, srv.SessionsChanged)
	d.onAdd = append(d.onAdd, srv.BackendAdded)
	d.onRemove = append(d.onRemove, srv.BackendRemoved)
	d.onStatus = append(d.onStatus, func(line string) {
		api.status.Store(&line)
		srv.Changed()
	})
	d.log.Info("D-Bus control interface ready", "bus", bus, "name", dbusapi.BusName)
	return stop, nil
}

// dbusGateway shows the daemon to the D-Bus interface.
type dbusGateway struct {
	d      *daemon
	status atomic.Pointer[string] // the last status line
}

func (g *dbusGateway) Version() string { return Version }

func (g *dbusGateway) Status() string {
	if line := g.status.Load(); line != nil {
		return *line
	}
	return supervisor.StatusLine(g.d.sup.Backends(), len(g.d.gw.Catalog().Tools))
}

func (g *dbusGateway) NumSessions() int { return g.d.gw.NumSessions() }

func (g *dbusGateway) Backends() []dbusapi.BackendStatus {
	tools := g.toolNames()
	list := g.d.sup.Backends()
	out := make([]dbusapi.BackendStatus, len(list))
	for i, b := range list {
		out[i] = backendStatus(b, tools[b.Name()])
		out[i].PendingChanges = g.d.pendingChanges(b.Name())
	}
	return out
}

func (g *dbusGateway) Backend(name string) (dbusapi.BackendStatus, bool) {
	b := g.d.sup.Backend(name)
	if b == nil {
		return dbusapi.BackendStatus{}, false
	}
	st := backendStatus(b, g.toolNames()[name])
	st.PendingChanges = g.d.pendingChanges(name)
	st.StderrTail = b.StderrTail(math.MaxInt)
	u := b.Usage()
	st.MemoryCurrent, st.TasksCurrent, st.CPUUsageNSec = u.MemoryCurrent, u.TasksCurrent, u.CPUUsageNSec
	total, byTool := g.d.gw.OutputBytes(name)
	st.NBytesProcessed, st.NBytesReturned = total.Processed, total.Returned
	for _, t := range byTool {
		st.ToolOutputBytes = append(st.ToolOutputBytes, dbusapi.ToolOutputBytes{Tool: t.Tool, Processed: t.Processed, Returned: t.Returned})
	}
	return st, true
}

// toolNames returns the exposed tool names of each backend.
func (g *dbusGateway) toolNames() map[string][]string {
	byBackend := map[string][]string{}
	for _, t := range g.d.gw.Catalog().Tools {
		byBackend[t.Backend] = append(byBackend[t.Backend], t.Name)
	}
	return byBackend
}

func backendStatus(b *backend.Backend, tools []string) dbusapi.BackendStatus {
	st := b.Status()
	h := b.Health()
	cfg := b.Config()
	var since uint64
	if !st.Since.IsZero() {
		since = uint64(st.Since.UnixMicro())
	}
	out := dbusapi.BackendStatus{
		Name:                 b.Name(),
		State:                st.State.String(),
		MainPID:              uint32(st.PID),
		NRestarts:            uint32(st.Restarts),
		LastExitStatus:       int32(st.LastExit.Status()),
		LastExitCode:         st.LastExit.ExitCode(),
		LastError:            st.LastError,
		StateChangeTimestamp: since,
		Tools:                tools,
		Command:              command(cfg),
		URL:                  st.URL,
		Era:                  st.Server.Era().String(),
		ConsecutiveFailures:  uint32(h.ConsecutiveFailures),
		LastCheckTimestamp:   micros(h.LastCheck),
		LastCheckLatencyUSec: uint64(h.LastCheckLatency.Microseconds()),
		CircuitOpenTimestamp: micros(h.CircuitOpen),
		CallsInFlight:        uint32(h.CallsInFlight),
		CallsQueued:          uint32(h.CallsQueued),
		NCalls:               h.NCalls,
		NFailedCalls:         h.NFailedCalls,
		NFallbacks:           h.NFallbacks,
		Unit:                 b.UnitName(),
		TokenExpiryTimestamp: micros(b.TokenExpiry()),
	}
	if st.Server != nil {
		out.ProtocolVersion = st.Server.ProtocolVersion
	}
	if peer, ok := b.Peer(); ok {
		out.PeerPID, out.PeerUID, out.PeerGID = peer.PID, peer.UID, peer.GID
	}
	out.Instances, out.NIdle, out.NBusy = instanceRows(b)
	return out
}

// command is the command line a backend runs; none for a cli backend,
// whose tools each have their own, or a remote one.
func command(cfg *config.Backend) []string {
	if cfg.Transport == "cli" || cfg.IsRemote() {
		return nil
	}
	return append([]string{cfg.Command}, cfg.Args...)
}

// micros is t in microseconds since the epoch, 0 for the zero time.
func micros(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixMicro())
}

func (g *dbusGateway) Tools() []dbusapi.Tool {
	entries := g.d.gw.Catalog().Tools
	tools := make([]dbusapi.Tool, len(entries))
	for i, t := range entries {
		tools[i] = dbusapi.Tool{Name: t.Name, Backend: t.Backend, Description: t.Description}
	}
	return tools
}

func (g *dbusGateway) StartBackend(ctx context.Context, name string) error {
	return g.control(ctx, name, (*backend.Backend).Start)
}

func (g *dbusGateway) StopBackend(ctx context.Context, name string) error {
	return g.control(ctx, name, (*backend.Backend).Stop)
}

func (g *dbusGateway) RestartBackend(ctx context.Context, name string) error {
	return g.control(ctx, name, (*backend.Backend).Restart)
}

func (g *dbusGateway) control(ctx context.Context, name string, fn func(*backend.Backend, context.Context) error) error {
	b := g.d.sup.Backend(name)
	if b == nil {
		return fmt.Errorf("%w %q", dbusapi.ErrNoSuchBackend, name)
	}
	if err := fn(b, ctx); err != nil {
		return fmt.Errorf("backend %q: %w", name, err)
	}
	return nil
}

func (g *dbusGateway) Reload(ctx context.Context) error {
	err := g.d.Reload(ctx)
	var cfgErr *config.Error
	if errors.As(err, &cfgErr) {
		return dbusapi.InvalidConfig(err)
	}
	return err
}
