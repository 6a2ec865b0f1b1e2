// Package unitrun runs backends as systemd units of their own
// (mcpgate-backend@NAME.service, runner = "unit"): systemd starts, isolates,
// limits and cleans up each one, while mcpgated keeps their standard
// streams. mcpgated starts an instance with RestartUnit; the instance's
// ExecStart=, backend-exec, connects to the runner's socket, where the
// unit its process belongs to (systemd's GetUnitByPID, which no process can
// forge) says which start it is; it receives the server's command line,
// environment and pipes (package wire) and execs the server.
//
// Everything goes through the methods the package's polkit rule grants
// user mcpgate on these units alone: start, stop, restart, reset-failed
// and set-property. Transient units are never used: systemd 252 gives
// polkit no unit name to decide on for them.
package unitrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/unitrun/wire"
	"github.com/mcpgate/mcpgate/internal/units"
)

const (
	systemdName     = units.SystemdName
	systemdPath     = units.SystemdPath
	managerIface    = units.ManagerInterface
	unitIface       = units.UnitInterface
	serviceIface    = units.ServiceInterface
	propertiesIface = units.PropertiesInterface

	// identifyTimeout bounds how long a connection to the socket may take
	// to be identified; maxIdentifying bounds how many are at once.
	identifyTimeout = 5 * time.Second
	maxIdentifying  = 32
)

// Runner starts backends as instances of the template. It is safe for
// concurrent use.
type Runner struct {
	bus     *dbus.Conn
	ln      *net.UnixListener
	log     *slog.Logger
	signals chan *dbus.Signal
	slots   chan struct{} // identifications in progress
	// refusals keeps refused connections from flooding the journal.
	refusals *journal.Limiter
	done     chan struct{} // closed by Close

	mu       sync.Mutex
	starting map[dbus.ObjectPath]chan peer // units whose helper we wait for
	watched  map[dbus.ObjectPath]*follower // units whose changes we follow
	closed   bool
	wg       sync.WaitGroup
}

// peer is an identified connection from backend-exec.
type peer struct {
	conn *net.UnixConn
	pid  int
}

// New listens on socket (removing a stale one) and returns a runner that
// starts units through systemd on bus, which the caller keeps owning and
// closes after Close.
func New(bus *dbus.Conn, socket string, log *slog.Logger) (*Runner, error) {
	if err := bus.Object(systemdName, systemdPath).Call(managerIface+".Subscribe", 0).Err; err != nil {
		return nil, fmt.Errorf("runner = \"unit\": cannot follow systemd's units on the bus: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("runner = \"unit\": %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("runner = \"unit\": backend socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := restrictSocket(socket); err != nil {
		ln.Close()
		return nil, err
	}
	r := &Runner{
		bus:      bus,
		ln:       ln,
		log:      log,
		signals:  make(chan *dbus.Signal, 64),
		slots:    make(chan struct{}, maxIdentifying),
		refusals: journal.NewLimiter(refusalWindow, refusalsPerUID, refusalsTotal, refusalUIDs),
		done:     make(chan struct{}),
		starting: make(map[dbus.ObjectPath]chan peer),
		watched:  make(map[dbus.ObjectPath]*follower),
	}
	bus.Signal(r.signals)
	r.wg.Add(2)
	go r.accept()
	go r.dispatch()
	return r, nil
}

// restrictSocket lets only the backend units connect to socket: they run
// in group wire.SocketGroup, each under a dynamic user of its own, and the
// socket is that group's (0660). Which unit a peer is still decides who it
// is; the group keeps every other local user from even connecting.
func restrictSocket(socket string) error {
	g, err := user.LookupGroup(wire.SocketGroup)
	if err != nil {
		return fmt.Errorf("runner = \"unit\": the backend units' group %s: %w; it comes with the mcpgate package (sysusers.d/mcpgate.conf)", wire.SocketGroup, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return fmt.Errorf("runner = \"unit\": group %s has gid %q", wire.SocketGroup, g.Gid)
	}
	if err := os.Chown(socket, -1, gid); err != nil {
		return fmt.Errorf("runner = \"unit\": backend socket: %w (mcpgated must be in group %s: SupplementaryGroups= in mcpgate.service)", err, wire.SocketGroup)
	}
	if err := os.Chmod(socket, 0o660); err != nil {
		return fmt.Errorf("runner = \"unit\": backend socket: %w", err)
	}
	return nil
}

// Close stops listening and ends every Wait in progress; it does not stop
// the units.
func (r *Runner) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	close(r.done)
	r.ln.Close()
	r.bus.RemoveSignal(r.signals)
	r.wg.Wait()
}

// Start starts unit (an instance of Template) with props set on it first,
// waits until its backend-exec has connected, and hands it spec and stdio.
// It returns once the server runs in the unit, or with why not.
func (r *Runner) Start(ctx context.Context, unit string, spec wire.Spec, stdio [3]*os.File, props []config.UnitProperty) (*Instance, error) {
	manager := r.bus.Object(systemdName, systemdPath)
	path, err := load(ctx, r.bus, unit)
	if err != nil {
		return nil, err
	}
	f, unwatch, err := r.watch(path)
	if err != nil {
		return nil, err
	}
	inst := &Instance{r: r, unit: unit, path: path, f: f, unwatch: unwatch}
	ok := false
	defer func() {
		if !ok {
			unwatch()
		}
	}()
	before, err := inst.invocation(ctx)
	if err != nil {
		return nil, err
	}
	props = r.withResets(ctx, unit, props)
	if len(props) > 0 {
		values := make([]struct {
			Name  string
			Value dbus.Variant
		}, len(props))
		for i, p := range props {
			values[i].Name, values[i].Value = p.Name, dbus.MakeVariant(p.Value)
		}
		if err := manager.CallWithContext(ctx, managerIface+".SetUnitProperties", 0, unit, true, values).Err; err != nil {
			return nil, fmt.Errorf("set the limits of %s: %w", unit, explain(err))
		}
	}
	peers := make(chan peer, 1)
	r.mu.Lock()
	r.starting[path] = peers
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.starting[path] == peers {
			delete(r.starting, path)
		}
		r.mu.Unlock()
	}()
	if err := manager.CallWithContext(ctx, managerIface+".RestartUnit", 0, unit, "replace").Err; err != nil {
		return nil, fmt.Errorf("start %s: %w", unit, explain(err))
	}
	var p peer
	for p.conn == nil {
		select {
		case p = <-peers:
		case _, open := <-f.changed:
			if !open {
				return nil, fmt.Errorf("unit %s: the gateway is shutting down", unit)
			}
			if why := inst.failedStart(ctx, before); why != "" {
				return nil, fmt.Errorf("unit %s failed before its backend-exec connected: %s", unit, why)
			}
		case <-ctx.Done():
			inst.Stop()
			return nil, fmt.Errorf("unit %s: backend-exec did not connect: %w", unit, ctx.Err())
		}
	}
	defer p.conn.Close()
	inst.pid = p.pid
	if inst.invocationID, err = inst.invocation(ctx); err != nil {
		inst.Stop()
		return nil, err
	}
	if err := r.hand(ctx, p.conn, spec, stdio); err != nil {
		inst.Stop()
		return nil, fmt.Errorf("unit %s: %w", unit, err)
	}
	ok = true
	return inst, nil
}

// hand sends spec and stdio to backend-exec and waits for its exec: its end
// of the connection closes without a word, or it says what failed.
func (r *Runner) hand(ctx context.Context, conn *net.UnixConn, spec wire.Spec, stdio [3]*os.File) error {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if err := wire.Send(conn, spec, stdio); err != nil {
		return fmt.Errorf("hand the server to backend-exec: %w", err)
	}
	_ = conn.CloseWrite()
	why, err := io.ReadAll(io.LimitReader(conn, 4096))
	if err != nil {
		return fmt.Errorf("backend-exec did not exec the server: %w", err)
	}
	if len(why) > 0 {
		return fmt.Errorf("backend-exec: %s", strings.TrimSpace(string(why)))
	}
	return nil
}

// explain turns polkit's refusal into what to do about it.
func explain(err error) error {
	var e dbus.Error
	if errors.As(err, &e) && (e.Name == "org.freedesktop.DBus.Error.AccessDenied" || e.Name == "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired") {
		return fmt.Errorf("%w (polkit does not let this user manage mcpgate-backend@*.service: install the mcpgate package's rule /usr/share/polkit-1/rules.d/50-mcpgate.rules and check that polkitd runs)", err)
	}
	return err
}
