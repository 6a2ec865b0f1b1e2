package dbusapi

import (
	"context"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// managerObject is /org/mcpgate/Gateway1. Its exported methods are the
// D-Bus methods of ManagerInterface.
type managerObject struct{ s *Server }

// ListBackends returns every backend and its object, sorted by name.
func (m managerObject) ListBackends() ([]BackendRef, *dbus.Error) {
	refs := []BackendRef{}
	for _, b := range m.s.gw.Backends() {
		refs = append(refs, BackendRef{b.Name, BackendPath(b.Name)})
	}
	return refs, nil
}

// GetBackend returns the object of the named backend.
func (m managerObject) GetBackend(name string) (dbus.ObjectPath, *dbus.Error) {
	if _, ok := m.s.gw.Backend(name); !ok {
		return "", noSuchBackend(name)
	}
	return BackendPath(name), nil
}

// StartBackend starts the named backend and waits for its handshake.
func (m managerObject) StartBackend(msg dbus.Message, name string) *dbus.Error {
	return m.s.control(msg, name, m.s.gw.StartBackend)
}

// StopBackend stops the named backend and keeps it stopped.
func (m managerObject) StopBackend(msg dbus.Message, name string) *dbus.Error {
	return m.s.control(msg, name, m.s.gw.StopBackend)
}

// RestartBackend restarts the named backend with its restart counter reset.
func (m managerObject) RestartBackend(msg dbus.Message, name string) *dbus.Error {
	return m.s.control(msg, name, m.s.gw.RestartBackend)
}

// Reload re-reads the configuration and returns once it is applied.
func (m managerObject) Reload(msg dbus.Message) *dbus.Error {
	if err := m.s.authorize(msg); err != nil {
		return err
	}
	return dbusError(m.s.gw.Reload(m.s.ctx))
}

// toolRow is one element of ListTools' a(sss).
type toolRow struct{ Name, Backend, Description string }

// ListTools returns every exposed tool: its name, backend and description.
func (m managerObject) ListTools() ([]toolRow, *dbus.Error) {
	rows := []toolRow{}
	for _, t := range m.s.gw.Tools() {
		rows = append(rows, toolRow(t))
	}
	return rows, nil
}

func (m managerObject) properties() (string, map[string]dbus.Variant, *dbus.Error) {
	st := m.s.managerStatus()
	return ManagerInterface, map[string]dbus.Variant{
		"Version":          dbus.MakeVariant(st.Version),
		"NBackends":        dbus.MakeVariant(st.NBackends),
		"NHealthyBackends": dbus.MakeVariant(st.NHealthyBackends),
		"NTools":           dbus.MakeVariant(st.NTools),
		"NSessions":        dbus.MakeVariant(st.NSessions),
		"NClients":         dbus.MakeVariant(st.NClients),
		"Listeners":        dbus.MakeVariant(nonNil(st.Listeners)),
		"Status":           dbus.MakeVariant(st.Status),
	}, nil
}

// backendObject is /org/mcpgate/Gateway1/backend/NAME. Its exported methods
// are the D-Bus methods of BackendInterface.
type backendObject struct {
	s    *Server
	name string
}

// Start starts the backend and waits for its handshake.
func (b backendObject) Start(msg dbus.Message) *dbus.Error {
	return b.s.control(msg, b.name, b.s.gw.StartBackend)
}

// Stop stops the backend and keeps it stopped.
func (b backendObject) Stop(msg dbus.Message) *dbus.Error {
	return b.s.control(msg, b.name, b.s.gw.StopBackend)
}

// Restart restarts the backend with its restart counter reset.
func (b backendObject) Restart(msg dbus.Message) *dbus.Error {
	return b.s.control(msg, b.name, b.s.gw.RestartBackend)
}

func (b backendObject) properties() (string, map[string]dbus.Variant, *dbus.Error) {
	st, ok := b.s.gw.Backend(b.name)
	if !ok {
		return BackendInterface, nil, noSuchBackend(b.name)
	}
	props := watchedBackend(st)
	props["Name"] = dbus.MakeVariant(st.Name)
	props["LastExitStatus"] = dbus.MakeVariant(st.LastExitStatus)
	props["LastExitCode"] = dbus.MakeVariant(st.LastExitCode)
	props["StderrTail"] = dbus.MakeVariant(nonNil(st.StderrTail))
	props["Command"] = dbus.MakeVariant(nonNil(st.Command))
	props["NBytesProcessed"] = dbus.MakeVariant(st.NBytesProcessed)
	props["NBytesReturned"] = dbus.MakeVariant(st.NBytesReturned)
	props["ToolOutputBytes"] = dbus.MakeVariant(nonNil(st.ToolOutputBytes))
	props["URL"] = dbus.MakeVariant(st.URL)
	props["Unit"] = dbus.MakeVariant(st.Unit)
	props["TokenExpiryTimestamp"] = dbus.MakeVariant(st.TokenExpiryTimestamp)
	props["PeerPID"] = dbus.MakeVariant(st.PeerPID)
	props["PeerUID"] = dbus.MakeVariant(st.PeerUID)
	props["PeerGID"] = dbus.MakeVariant(st.PeerGID)
	props["MemoryCurrent"] = dbus.MakeVariant(st.MemoryCurrent)
	props["TasksCurrent"] = dbus.MakeVariant(st.TasksCurrent)
	props["CPUUsageNSec"] = dbus.MakeVariant(st.CPUUsageNSec)
	return BackendInterface, props, nil
}

// control authorizes a mutating call and runs it.
func (s *Server) control(msg dbus.Message, name string, fn func(context.Context, string) error) *dbus.Error {
	if err := s.authorize(msg); err != nil {
		return err
	}
	return dbusError(fn(s.ctx, name))
}

// propertySource is an object with properties.
type propertySource interface {
	properties() (iface string, values map[string]dbus.Variant, err *dbus.Error)
}

// properties serves org.freedesktop.DBus.Properties for one object. Every
// read asks the gateway afresh; every property is read-only.
type properties struct {
	src  propertySource
	auth Authorizer      // decides who reads StderrTail; see OutputAuthorizer
	ctx  context.Context // the server's; bounds authorizer calls
}

// Get returns one property.
func (p properties) Get(msg dbus.Message, iface, name string) (dbus.Variant, *dbus.Error) {
	values, err := p.values(iface)
	if err != nil {
		return dbus.Variant{}, err
	}
	v, ok := values[name]
	if _, private := privateProperties[name]; private && ok {
		if err := p.mayReadOutput(msg); err != nil {
			return dbus.Variant{}, dbusError(err)
		}
	}
	if !ok {
		return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{"no property " + name + " in " + iface})
	}
	return v, nil
}

// GetAll returns every property of iface; "" means the object's interface.
// The private properties are empty for a caller that may not read them.
func (p properties) GetAll(msg dbus.Message, iface string) (map[string]dbus.Variant, *dbus.Error) {
	values, err := p.values(iface)
	if err != nil || !hasPrivate(values) || p.mayReadOutput(msg) == nil {
		return values, err
	}
	for name, empty := range privateProperties {
		if _, ok := values[name]; ok {
			values[name] = dbus.MakeVariant(empty)
		}
	}
	return values, nil
}

// privateProperties are the properties that can carry what a child printed
// or said (its stderr, the error message of its answers), each with its
// empty value.
var privateProperties = map[string]any{"StderrTail": []string{}, "LastError": ""}

func hasPrivate(values map[string]dbus.Variant) bool {
	for name := range privateProperties {
		if _, ok := values[name]; ok {
			return true
		}
	}
	return false
}

// mayReadOutput asks the server's authorizer whether the caller may read
// backend output; without an OutputAuthorizer nobody may.
func (p properties) mayReadOutput(msg dbus.Message) error {
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	oa, ok := p.auth.(OutputAuthorizer)
	if !ok || p.ctx == nil {
		return fmt.Errorf("%w: this gateway shows backend output to nobody over D-Bus", ErrAccessDenied)
	}
	return oa.MayReadOutput(p.ctx, sender)
}

// Set refuses: every property is read-only.
func (p properties) Set(iface, name string, _ dbus.Variant) *dbus.Error {
	if _, err := p.values(iface); err != nil {
		return err
	}
	return dbus.NewError("org.freedesktop.DBus.Error.PropertyReadOnly", []any{"property " + name + " is read-only"})
}

func (p properties) values(iface string) (map[string]dbus.Variant, *dbus.Error) {
	own, values, err := p.src.properties()
	switch {
	case iface != own && iface != "":
		if iface == propertiesInterface || iface == introspectInterface || iface == "org.freedesktop.DBus.Peer" {
			return map[string]dbus.Variant{}, nil
		}
		return nil, dbus.NewError("org.freedesktop.DBus.Error.UnknownInterface", []any{"no interface " + iface})
	case err != nil:
		return nil, err
	}
	return values, nil
}
