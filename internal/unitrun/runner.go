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
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/unitrun/wire"
)

const (
	systemdName     = "org.freedesktop.systemd1"
	systemdPath     = "/org/freedesktop/systemd1"
	managerIface    = "org.freedesktop.systemd1.Manager"
	unitIface       = "org.freedesktop.systemd1.Unit"
	serviceIface    = "org.freedesktop.systemd1.Service"
	propertiesIface = "org.freedesktop.DBus.Properties"

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
	done    chan struct{} // closed by Close

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
	// Every backend's dynamic user must connect; the peer's unit decides
	// who it is, not the file's mode.
	if err := os.Chmod(socket, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("runner = \"unit\": backend socket: %w", err)
	}
	r := &Runner{
		bus:      bus,
		ln:       ln,
		log:      log,
		signals:  make(chan *dbus.Signal, 64),
		slots:    make(chan struct{}, maxIdentifying),
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

// accept identifies every connection to the socket.
func (r *Runner) accept() {
	defer r.wg.Done()
	for {
		conn, err := r.ln.AcceptUnix()
		if err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			r.log.Warn("backend socket: " + err.Error())
			continue
		}
		select {
		case r.slots <- struct{}{}:
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer func() { <-r.slots }()
				r.identify(conn)
			}()
		default:
			r.log.Warn("backend socket: too many connections being identified; closed one")
			conn.Close()
		}
	}
}

// identify hands conn to the start waiting for its unit, or refuses it.
func (r *Runner) identify(conn *net.UnixConn) {
	ucred, err := peerCred(conn)
	if err != nil {
		r.log.Warn("backend socket: refused a connection: " + err.Error())
		conn.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), identifyTimeout)
	defer cancel()
	var path dbus.ObjectPath
	err = r.bus.Object(systemdName, systemdPath).CallWithContext(ctx, managerIface+".GetUnitByPID", 0, uint32(ucred.Pid)).Store(&path)
	r.mu.Lock()
	ch, ok := r.starting[path]
	if ok && err == nil {
		delete(r.starting, path)
	}
	r.mu.Unlock()
	if err != nil || !ok {
		why := "its unit is no backend this gateway is starting"
		if err != nil {
			why = "systemd does not know its unit: " + err.Error()
		}
		r.log.Warn(fmt.Sprintf("backend socket: refused a connection from PID %d (uid %d): %s", ucred.Pid, ucred.Uid, why),
			"peer_pid", ucred.Pid, "peer_uid", ucred.Uid)
		conn.Close()
		return
	}
	ch <- peer{conn: conn, pid: int(ucred.Pid)} // buffered; only its start reads it
}

func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// follower is what is known of a unit from its PropertiesChanged signals:
// systemd sends the values of its Service properties (Result,
// ExecMainStatus, …) before those of the Unit (ActiveState, InvocationID)
// for each change, and may unload an inactive unit at once, after which
// its properties read as a fresh unit's.
type follower struct {
	changed chan struct{} // a wake-up per change; closed when the runner closes
	mu      sync.Mutex
	props   map[string]dbus.Variant
}

// last returns the value of name the signals last carried.
func (f *follower) last(name string) (dbus.Variant, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.props[name]
	return v, ok
}

// dispatch records what changed on each followed unit and wakes its
// follower.
func (r *Runner) dispatch() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			r.mu.Lock()
			for path, f := range r.watched {
				close(f.changed)
				delete(r.watched, path)
			}
			r.mu.Unlock()
			return
		case sig := <-r.signals:
			if sig.Name != propertiesIface+".PropertiesChanged" || len(sig.Body) < 2 {
				continue
			}
			changed, _ := sig.Body[1].(map[string]dbus.Variant)
			r.mu.Lock()
			if f, ok := r.watched[sig.Path]; ok {
				f.mu.Lock()
				for k, v := range changed {
					f.props[k] = v
				}
				f.mu.Unlock()
				select {
				case f.changed <- struct{}{}:
				default: // a wake-up is pending already
				}
			}
			r.mu.Unlock()
		}
	}
}

// watch follows the unit at path until the returned function is called.
func (r *Runner) watch(path dbus.ObjectPath) (*follower, func(), error) {
	match := []dbus.MatchOption{
		dbus.WithMatchObjectPath(path),
		dbus.WithMatchInterface(propertiesIface),
		dbus.WithMatchMember("PropertiesChanged"),
	}
	if err := r.bus.AddMatchSignal(match...); err != nil {
		return nil, nil, fmt.Errorf("follow %s: %w", path, err)
	}
	f := &follower{changed: make(chan struct{}, 1), props: map[string]dbus.Variant{}}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, nil, errors.New("the runner is closed")
	}
	if _, dup := r.watched[path]; dup {
		r.mu.Unlock()
		_ = r.bus.RemoveMatchSignal(match...)
		return nil, nil, fmt.Errorf("unit %s is in use already", path)
	}
	r.watched[path] = f
	r.mu.Unlock()
	return f, func() {
		r.mu.Lock()
		if r.watched[path] == f {
			delete(r.watched, path)
		}
		r.mu.Unlock()
		_ = r.bus.RemoveMatchSignal(match...)
	}, nil
}

// Start starts unit (an instance of Template) with props set on it first,
// waits until its backend-exec has connected, and hands it spec and stdio.
// It returns once the server runs in the unit, or with why not.
func (r *Runner) Start(ctx context.Context, unit string, spec wire.Spec, stdio [3]*os.File, props []config.UnitProperty) (*Instance, error) {
	manager := r.bus.Object(systemdName, systemdPath)
	var path dbus.ObjectPath
	if err := manager.CallWithContext(ctx, managerIface+".LoadUnit", 0, unit).Store(&path); err != nil {
		return nil, fmt.Errorf("unit %s: %w", unit, err)
	}
	u := r.bus.Object(systemdName, path)
	if state, err := getString(ctx, u, unitIface, "LoadState"); err != nil {
		return nil, fmt.Errorf("unit %s: %w", unit, err)
	} else if state != "loaded" {
		return nil, fmt.Errorf("unit %s is %s: is the template %s installed? (it comes with the mcpgate package)", unit, state, Template)
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

func getString(ctx context.Context, o dbus.BusObject, iface, name string) (string, error) {
	var v dbus.Variant
	if err := o.CallWithContext(ctx, propertiesIface+".Get", 0, iface, name).Store(&v); err != nil {
		return "", err
	}
	s, _ := v.Value().(string)
	return s, nil
}
