package dbusapi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/godbus/dbus/v5"
)

// Client calls a running gateway's interface. It never starts the gateway
// by bus activation: calls to a gateway that is not running fail with an
// error for which NotRunning holds.
type Client struct {
	conn *dbus.Conn
	// Interactive sets ALLOW_INTERACTIVE_AUTHORIZATION on mutating calls,
	// letting polkit ask the user for a password through an agent.
	Interactive bool
}

// Dial connects to the system bus, or to the session bus when session is
// set. DBUS_SYSTEM_BUS_ADDRESS and DBUS_SESSION_BUS_ADDRESS are honoured.
func Dial(session bool) (*Client, error) {
	var conn *dbus.Conn
	var err error
	if session {
		conn, err = dbus.ConnectSessionBus()
	} else {
		conn, err = dbus.ConnectSystemBus()
	}
	if err != nil {
		bus := "system"
		if session {
			bus = "session"
		}
		return nil, &notRunningError{fmt.Errorf("connect to the %s bus: %w", bus, err)}
	}
	return &Client{conn: conn}, nil
}

// NewClient returns a client on an open connection, which the caller keeps
// owning.
func NewClient(conn *dbus.Conn) *Client { return &Client{conn: conn} }

// Close closes the connection Dial opened.
func (c *Client) Close() error { return c.conn.Close() }

// NotRunning reports whether err says that the gateway is not on the bus,
// or that the bus itself is unreachable.
func NotRunning(err error) bool {
	var nr *notRunningError
	if errors.As(err, &nr) {
		return true
	}
	var de dbus.Error
	if errors.As(err, &de) {
		switch de.Name {
		case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
			"org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
			return true
		}
	}
	return errors.Is(err, dbus.ErrClosed)
}

type notRunningError struct{ err error }

func (e *notRunningError) Error() string { return e.err.Error() }
func (e *notRunningError) Unwrap() error { return e.err }

// ErrorName returns the D-Bus error name in err, or "".
func ErrorName(err error) string {
	var de dbus.Error
	if errors.As(err, &de) {
		return de.Name
	}
	var dep *dbus.Error
	if errors.As(err, &dep) {
		return dep.Name
	}
	return ""
}

func (c *Client) call(ctx context.Context, path dbus.ObjectPath, method string, flags dbus.Flags, args []any, out ...any) error {
	call := <-c.conn.SendWithContext(ctx, methodCall(path, method, flags|dbus.FlagNoAutoStart, args), make(chan *dbus.Call, 1)).Done
	if call.Err != nil {
		return call.Err // a dbus.Error's message is its body's
	}
	return call.Store(out...)
}

// methodCall builds a call of method ("interface.member") to the gateway.
// Unlike (*dbus.Object).Call it keeps every flag, including
// ALLOW_INTERACTIVE_AUTHORIZATION.
func methodCall(path dbus.ObjectPath, method string, flags dbus.Flags, args []any) *dbus.Message {
	i := strings.LastIndex(method, ".")
	msg := &dbus.Message{
		Type:  dbus.TypeMethodCall,
		Flags: flags,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:        dbus.MakeVariant(path),
			dbus.FieldDestination: dbus.MakeVariant(BusName),
			dbus.FieldInterface:   dbus.MakeVariant(method[:i]),
			dbus.FieldMember:      dbus.MakeVariant(method[i+1:]),
		},
		Body: args,
	}
	if len(args) > 0 {
		msg.Headers[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(args...))
	}
	return msg
}

func (c *Client) manage(ctx context.Context, path dbus.ObjectPath, method string, args ...any) error {
	var flags dbus.Flags
	if c.Interactive {
		flags = dbus.FlagAllowInteractiveAuthorization
	}
	return c.call(ctx, path, method, flags, args)
}

// Manager returns the manager's properties.
func (c *Client) Manager(ctx context.Context) (ManagerStatus, error) {
	var props map[string]dbus.Variant
	var m ManagerStatus
	if err := c.call(ctx, ManagerPath, propertiesInterface+".GetAll", 0, []any{ManagerInterface}, &props); err != nil {
		return m, err
	}
	err := storeProps(props, map[string]any{
		"Version": &m.Version, "NBackends": &m.NBackends, "NHealthyBackends": &m.NHealthyBackends,
		"NTools": &m.NTools, "NSessions": &m.NSessions, "Status": &m.Status,
		"NClients": &m.NClients, "Listeners": &m.Listeners,
	})
	return m, err
}

// ListBackends returns every backend and its object.
func (c *Client) ListBackends(ctx context.Context) ([]BackendRef, error) {
	var refs []BackendRef
	err := c.call(ctx, ManagerPath, ManagerInterface+".ListBackends", 0, nil, &refs)
	return refs, err
}

// Backend returns the properties of the named backend.
func (c *Client) Backend(ctx context.Context, name string) (BackendStatus, error) {
	var path dbus.ObjectPath
	var b BackendStatus
	if err := c.call(ctx, ManagerPath, ManagerInterface+".GetBackend", 0, []any{name}, &path); err != nil {
		return b, err
	}
	var props map[string]dbus.Variant
	if err := c.call(ctx, path, propertiesInterface+".GetAll", 0, []any{BackendInterface}, &props); err != nil {
		return b, err
	}
	err := storeProps(props, map[string]any{
		"Name": &b.Name, "State": &b.State, "MainPID": &b.MainPID, "NRestarts": &b.NRestarts,
		"LastExitStatus": &b.LastExitStatus, "LastExitCode": &b.LastExitCode, "LastError": &b.LastError,
		"StateChangeTimestamp": &b.StateChangeTimestamp, "Tools": &b.Tools,
		"StderrTail": &b.StderrTail, "Command": &b.Command, "URL": &b.URL, "Unit": &b.Unit, "TokenExpiryTimestamp": &b.TokenExpiryTimestamp,
		"PeerPID": &b.PeerPID, "PeerUID": &b.PeerUID, "PeerGID": &b.PeerGID,
		"MemoryCurrent": &b.MemoryCurrent, "TasksCurrent": &b.TasksCurrent, "CPUUsageNSec": &b.CPUUsageNSec,
		"ConsecutiveFailures": &b.ConsecutiveFailures, "LastCheckTimestamp": &b.LastCheckTimestamp,
		"LastCheckLatencyUSec": &b.LastCheckLatencyUSec, "CircuitOpenTimestamp": &b.CircuitOpenTimestamp,
		"CallsInFlight": &b.CallsInFlight, "CallsQueued": &b.CallsQueued,
		"NCalls": &b.NCalls, "NFailedCalls": &b.NFailedCalls, "NFallbacks": &b.NFallbacks,
		"NBytesProcessed": &b.NBytesProcessed, "NBytesReturned": &b.NBytesReturned,
		"ToolOutputBytes": &b.ToolOutputBytes,
		"Instances":       &b.Instances, "NIdle": &b.NIdle, "NBusy": &b.NBusy,
		"PendingChanges": &b.PendingChanges,
		"Era":            &b.Era, "ProtocolVersion": &b.ProtocolVersion,
	})
	return b, err
}

// ListTools returns every tool the gateway exposes.
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	var rows []toolRow
	if err := c.call(ctx, ManagerPath, ManagerInterface+".ListTools", 0, nil, &rows); err != nil {
		return nil, err
	}
	tools := make([]Tool, len(rows))
	for i, r := range rows {
		tools[i] = Tool(r)
	}
	return tools, nil
}

// StartBackend starts the named backend.
func (c *Client) StartBackend(ctx context.Context, name string) error {
	return c.manage(ctx, ManagerPath, ManagerInterface+".StartBackend", name)
}

// StopBackend stops the named backend.
func (c *Client) StopBackend(ctx context.Context, name string) error {
	return c.manage(ctx, ManagerPath, ManagerInterface+".StopBackend", name)
}

// RestartBackend restarts the named backend.
func (c *Client) RestartBackend(ctx context.Context, name string) error {
	return c.manage(ctx, ManagerPath, ManagerInterface+".RestartBackend", name)
}

// Reload makes the gateway re-read its configuration.
func (c *Client) Reload(ctx context.Context) error {
	return c.manage(ctx, ManagerPath, ManagerInterface+".Reload")
}

// storeProps stores the properties named in dst; a missing one is an error.
func storeProps(props map[string]dbus.Variant, dst map[string]any) error {
	for name, p := range dst {
		v, ok := props[name]
		if !ok {
			return fmt.Errorf("the gateway did not send property %s", name)
		}
		if err := v.Store(p); err != nil {
			return fmt.Errorf("property %s: %w", name, err)
		}
	}
	return nil
}
