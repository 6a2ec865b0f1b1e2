package dbusapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"
)

const (
	propertiesInterface = "org.freedesktop.DBus.Properties"
	introspectInterface = "org.freedesktop.DBus.Introspectable"
	propertiesChanged   = propertiesInterface + ".PropertiesChanged"
)

// ErrNameTaken is returned, wrapped, by RequestName when another
// connection owns BusName.
var ErrNameTaken = errors.New("the bus name " + BusName + " is owned by another process")

// Options configure a Server.
type Options struct {
	// Authorizer decides about mutating calls; nil denies them all.
	Authorizer Authorizer
	Logger     *slog.Logger
	// SessionSignalInterval bounds how often PropertiesChanged announces
	// NSessions and NClients; 0 means DefaultSessionSignalInterval.
	SessionSignalInterval time.Duration
}

// Server exports the gateway's objects on one bus connection and emits
// their signals. Its methods may be called from any goroutine.
type Server struct {
	conn *dbus.Conn
	gw   Gateway
	auth Authorizer
	log  *slog.Logger
	// sessionInterval bounds the announcements of throttledManager.
	sessionInterval time.Duration

	manager, backend introspect.Interface

	ctx    context.Context // ends with Close; bounds the calls it serves
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}
	named  chan struct{} // closed once the name is ours: signals before would reach nobody
	once   sync.Once

	// managerBaseline is the manager's properties when the name became
	// ours; written before named is closed, read by the emitter after.
	managerBaseline map[string]dbus.Variant

	mu       sync.Mutex
	exported map[string]bool // backend names with an object
	events   []event         // for the emitter, in order
}

// event is a backend object appearing or disappearing.
type event struct {
	name   string
	added  bool
	signal bool // emit BackendNew or BackendRemoved
}

// NewServer returns a server for gw on conn. Nothing is exported until
// Export; Close stops it. The caller owns conn and closes it after Close.
func NewServer(conn *dbus.Conn, gw Gateway, opts Options) (*Server, error) {
	manager, backend, err := Interfaces()
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SessionSignalInterval <= 0 {
		opts.SessionSignalInterval = DefaultSessionSignalInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		conn: conn, gw: gw, auth: opts.Authorizer, log: opts.Logger,
		manager: manager, backend: backend,
		ctx: ctx, cancel: cancel,
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		named:    make(chan struct{}),
		exported: map[string]bool{},
	}
	s.sessionInterval = opts.SessionSignalInterval
	go s.emitter()
	return s, nil
}

// Export exports the manager object and one object for each of names.
// Call it before RequestName, so that the name never shows a half-built
// tree.
func (s *Server) Export(names []string) error {
	m := managerObject{s}
	exports := []struct {
		v     any
		iface string
	}{
		{m, ManagerInterface},
		{properties{m, s.auth, s.ctx}, propertiesInterface},
		{introspectable{s.manager, s.children}, introspectInterface},
	}
	for _, e := range exports {
		if err := s.conn.Export(e.v, ManagerPath, e.iface); err != nil {
			return fmt.Errorf("export %s on %s: %w", e.iface, ManagerPath, err)
		}
	}
	for _, name := range names {
		if err := s.add(name, false); err != nil {
			return err
		}
	}
	return nil
}

// RequestName takes BusName, without queueing. It returns an error wrapping
// ErrNameTaken when another connection has it, or the bus's error, e.g.
// org.freedesktop.DBus.Error.AccessDenied when the bus policy does not let
// this user own it.
func (s *Server) RequestName() error {
	reply, err := s.conn.RequestName(BusName, dbus.NameFlagDoNotQueue)
	if err != nil {
		return fmt.Errorf("request the bus name %s: %w", BusName, err)
	}
	switch reply {
	case dbus.RequestNameReplyPrimaryOwner, dbus.RequestNameReplyAlreadyOwner:
		s.once.Do(func() {
			// What the manager shows now is what later changes are
			// announced against: a change right after RequestName is
			// announced, not taken for the starting point.
			s.managerBaseline = watchedManager(s.managerStatus())
			close(s.named)
		})
		return nil
	}
	var pid uint32
	if err := s.conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, BusName).Store(&pid); err == nil {
		return fmt.Errorf("%w (pid %d); is another mcpgated running?", ErrNameTaken, pid)
	}
	return fmt.Errorf("%w; is another mcpgated running?", ErrNameTaken)
}

// BackendAdded exports the object of a backend that a reload added and
// emits BackendNew.
func (s *Server) BackendAdded(name string) {
	if err := s.add(name, true); err != nil {
		s.log.Warn("cannot export a backend on D-Bus", "backend", name, "err", err)
	}
}

// BackendRemoved removes the object of a backend that a reload removed and
// emits BackendRemoved.
func (s *Server) BackendRemoved(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exported[name] {
		return
	}
	path := BackendPath(name)
	for _, iface := range []string{BackendInterface, propertiesInterface, introspectInterface} {
		s.conn.Export(nil, path, iface)
	}
	delete(s.exported, name)
	s.events = append(s.events, event{name: name, signal: true})
	s.notify()
}

// Changed tells the server that a backend, the catalog or the status line
// changed: it compares the properties with what it last announced and
// emits PropertiesChanged for those that differ. It never blocks.
func (s *Server) Changed() {
	s.mu.Lock()
	s.notify()
	s.mu.Unlock()
}

// SessionsChanged tells the server that sessions opened or closed. It
// never blocks; NSessions and NClients are announced at most once per
// SessionSignalInterval, with the counts of the moment.
func (s *Server) SessionsChanged() { s.Changed() }

// Close stops emitting signals, releases the name, and makes the calls in
// progress fail. It does not close the connection.
func (s *Server) Close() {
	s.cancel()
	<-s.done
	s.conn.ReleaseName(BusName)
}

func (s *Server) add(name string, signal bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exported[name] {
		return nil
	}
	path := BackendPath(name)
	b := backendObject{s, name}
	exports := []struct {
		v     any
		iface string
	}{
		{b, BackendInterface},
		{properties{b, s.auth, s.ctx}, propertiesInterface},
		{introspectable{s.backend, nil}, introspectInterface},
	}
	for _, e := range exports {
		if err := s.conn.Export(e.v, path, e.iface); err != nil {
			return fmt.Errorf("export %s on %s: %w", e.iface, path, err)
		}
	}
	s.exported[name] = true
	s.events = append(s.events, event{name: name, added: true, signal: signal})
	s.notify()
	return nil
}

// notify wakes the emitter; s.mu must be held.
func (s *Server) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// children lists the manager's child nodes for introspection.
func (s *Server) children() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.exported) == 0 {
		return nil
	}
	return []string{"backend"}
}

// emitter announces changes, one at a time and in order, so that the
// backends' goroutines that report them never wait for the bus.
func (s *Server) emitter() {
	defer close(s.done)
	// What was last announced: a new object starts as a new backend does,
	// stopped, so its start is announced like any later change.
	announcedBackends := map[string]map[string]dbus.Variant{}
	var announcedManager map[string]dbus.Variant
	// Sessions come and go with every client: their counts are announced
	// at most once per sessionInterval, the latest counts when the
	// interval ends.
	var lastSessions time.Time
	var retry <-chan time.Time
	select {
	case <-s.ctx.Done():
		return
	case <-s.named:
	}
	announcedManager = s.managerBaseline
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		case <-retry:
			retry = nil
		}
		s.mu.Lock()
		events := s.events
		s.events = nil
		s.mu.Unlock()
		for _, e := range events {
			path := BackendPath(e.name)
			if e.added {
				announcedBackends[e.name] = watchedBackend(BackendStatus{Name: e.name, State: "stopped"})
			} else {
				delete(announcedBackends, e.name)
			}
			if e.signal {
				member := ManagerInterface + ".BackendRemoved"
				if e.added {
					member = ManagerInterface + ".BackendNew"
				}
				s.emit(ManagerPath, member, e.name, path)
			}
		}
		for _, b := range s.gw.Backends() {
			last, ok := announcedBackends[b.Name]
			if !ok {
				continue // its object is not exported yet
			}
			now := watchedBackend(b)
			if changed := diff(last, now); len(changed) > 0 {
				announcedBackends[b.Name] = now
				// A private property's value is for its readers only: the
				// signal, which every peer can receive, says only that it
				// changed.
				invalidated := []string{}
				for name := range privateProperties {
					if _, ok := changed[name]; ok {
						delete(changed, name)
						invalidated = append(invalidated, name)
					}
				}
				s.emit(BackendPath(b.Name), propertiesChanged, BackendInterface, changed, invalidated)
				if _, ok := changed["PendingChanges"]; ok {
					s.emit(BackendPath(b.Name), BackendInterface+".PendingChangesChanged", uint32(len(b.PendingChanges)))
				}
			}
		}
		now := watchedManager(s.managerStatus())
		changed := diff(announcedManager, now)
		if throttled(changed) && announcedManager != nil {
			if wait := s.sessionInterval - time.Since(lastSessions); wait > 0 {
				// Too soon: keep announcing the old counts until then.
				for name := range throttledManager {
					delete(changed, name)
					now[name] = announcedManager[name]
				}
				if retry == nil {
					retry = time.After(wait)
				}
			} else {
				lastSessions = time.Now()
			}
		}
		if len(changed) > 0 && announcedManager != nil {
			s.emit(ManagerPath, propertiesChanged, ManagerInterface, changed, []string{})
		}
		announcedManager = now
	}
}

func (s *Server) emit(path dbus.ObjectPath, member string, values ...any) {
	if err := s.conn.Emit(path, member, values...); err != nil && s.ctx.Err() == nil {
		s.log.Warn("cannot emit a D-Bus signal", "path", path, "signal", member, "err", err)
	}
}

// watchedBackend returns the backend properties announced with
// PropertiesChanged.
func watchedBackend(b BackendStatus) map[string]dbus.Variant {
	return map[string]dbus.Variant{
		"State":                dbus.MakeVariant(b.State),
		"StateChangeTimestamp": dbus.MakeVariant(b.StateChangeTimestamp),
		"MainPID":              dbus.MakeVariant(b.MainPID),
		"NRestarts":            dbus.MakeVariant(b.NRestarts),
		"LastError":            dbus.MakeVariant(b.LastError),
		"Tools":                dbus.MakeVariant(nonNil(b.Tools)),
		"ConsecutiveFailures":  dbus.MakeVariant(b.ConsecutiveFailures),
		"LastCheckTimestamp":   dbus.MakeVariant(b.LastCheckTimestamp),
		"LastCheckLatencyUSec": dbus.MakeVariant(b.LastCheckLatencyUSec),
		"CircuitOpenTimestamp": dbus.MakeVariant(b.CircuitOpenTimestamp),
		"CallsInFlight":        dbus.MakeVariant(b.CallsInFlight),
		"CallsQueued":          dbus.MakeVariant(b.CallsQueued),
		"NCalls":               dbus.MakeVariant(b.NCalls),
		"NFailedCalls":         dbus.MakeVariant(b.NFailedCalls),
		"NFallbacks":           dbus.MakeVariant(b.NFallbacks),
		"Instances":            dbus.MakeVariant(nonNilInstances(b.Instances)),
		"NIdle":                dbus.MakeVariant(b.NIdle),
		"NBusy":                dbus.MakeVariant(b.NBusy),
		"PendingChanges":       dbus.MakeVariant(nonNil(b.PendingChanges)),
		"Era":                  dbus.MakeVariant(b.Era),
		"ProtocolVersion":      dbus.MakeVariant(b.ProtocolVersion),
	}
}

func nonNilInstances(s []Instance) []Instance {
	if s == nil {
		return []Instance{}
	}
	return s
}

// watchedManager returns the manager properties announced with
// PropertiesChanged.
func watchedManager(m ManagerStatus) map[string]dbus.Variant {
	return map[string]dbus.Variant{
		"NBackends":        dbus.MakeVariant(m.NBackends),
		"NHealthyBackends": dbus.MakeVariant(m.NHealthyBackends),
		"NTools":           dbus.MakeVariant(m.NTools),
		"Status":           dbus.MakeVariant(m.Status),
		"NSessions":        dbus.MakeVariant(m.NSessions),
		"NClients":         dbus.MakeVariant(m.NClients),
		"Listeners":        dbus.MakeVariant(nonNil(m.Listeners)),
	}
}

// throttledManager are the manager properties that follow the sessions,
// announced at most once per sessionInterval.
var throttledManager = map[string]bool{"NSessions": true, "NClients": true}

func throttled(changed map[string]dbus.Variant) bool {
	for name := range throttledManager {
		if _, ok := changed[name]; ok {
			return true
		}
	}
	return false
}

// diff returns the members of now that differ from last.
func diff(last, now map[string]dbus.Variant) map[string]dbus.Variant {
	changed := map[string]dbus.Variant{}
	for k, v := range now {
		if old, ok := last[k]; !ok || !variantEqual(old, v) {
			changed[k] = v
		}
	}
	return changed
}

func variantEqual(a, b dbus.Variant) bool {
	if as, ok := a.Value().([]string); ok {
		bs, ok := b.Value().([]string)
		return ok && slices.Equal(as, bs)
	}
	if as, ok := a.Value().([]Instance); ok {
		bs, ok := b.Value().([]Instance)
		return ok && slices.Equal(as, bs)
	}
	if as, ok := a.Value().([]Listener); ok {
		bs, ok := b.Value().([]Listener)
		return ok && slices.Equal(as, bs)
	}
	if as, ok := a.Value().([]PendingChange); ok {
		bs, ok := b.Value().([]PendingChange)
		return ok && slices.Equal(as, bs)
	}
	return a.Signature() == b.Signature() && a.Value() == b.Value()
}

// nonNil returns s, or an empty slice for nil: D-Bus has no nil array.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// managerStatus gathers the manager's properties.
func (s *Server) managerStatus() ManagerStatus {
	backends := s.gw.Backends()
	m := ManagerStatus{
		Version:   s.gw.Version(),
		NBackends: uint32(len(backends)),
		NTools:    uint32(len(s.gw.Tools())),
		NSessions: uint32(s.gw.NumSessions()),
		NClients:  s.numClients(),
		Status:    s.gw.Status(),
		Listeners: s.listeners(),
	}
	for _, b := range backends {
		if b.State == "healthy" {
			m.NHealthyBackends++
		}
	}
	return m
}

// authorize checks a mutating call.
func (s *Server) authorize(msg dbus.Message) *dbus.Error {
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	if s.auth == nil {
		return dbus.NewError(ErrorAccessDenied, []any{"access denied: this gateway accepts no changes over D-Bus"})
	}
	interactive := msg.Flags&dbus.FlagAllowInteractiveAuthorization != 0
	if err := s.auth.Authorize(s.ctx, sender, interactive); err != nil {
		return dbusError(err)
	}
	return nil
}

// dbusError turns err into the interface's named error.
func dbusError(err error) *dbus.Error {
	if err == nil {
		return nil
	}
	name := ErrorFailed
	switch {
	case errors.Is(err, ErrNoSuchBackend):
		name = ErrorNoSuchBackend
	case errors.Is(err, ErrAccessDenied):
		name = ErrorAccessDenied
	case errors.Is(err, ErrInvalidConfig):
		name = ErrorInvalidConfig
	case errors.Is(err, ErrNoSuchClient):
		name = ErrorNoSuchClient
	case errors.Is(err, ErrNoSuchToken):
		name = ErrorNoSuchToken
	}
	return dbus.NewError(name, []any{err.Error()})
}

func noSuchBackend(name string) *dbus.Error {
	return dbusError(fmt.Errorf("%w %q", ErrNoSuchBackend, name))
}
