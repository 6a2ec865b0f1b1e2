package dbusapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// ApproveAction is the polkit action that allows approving and rejecting
// changed tools and resetting the integrity state: deciding what a model
// may be shown is a different trust than restarting a server.
const ApproveAction = "org.mcpgate.Gateway1.approve"

// ErrIntegrityOff is returned by the integrity methods of a gateway that
// does not pin what its backends offer.
var ErrIntegrityOff = errors.New("this gateway does not pin what its backends offer")

// PendingChange is one element of the Backend property PendingChanges,
// a(sssb): an item that differs from the approved baseline.
type PendingChange struct {
	Kind   string `json:"kind"`   // "tool", "prompt" or "template"
	Name   string `json:"name"`   // its name at the backend; a template's uriTemplate
	Reason string `json:"reason"` // why it is pending
	Served bool   `json:"served"` // integrity = "warn": served though not approved
}

// ReviewedChange is one element of what ReviewChanges returns,
// a(sssbbss): a pending change with the version it is and its diff, so
// that what is approved is what was shown.
type ReviewedChange struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// ID is "KIND:NAME@FINGERPRINT", the version shown: what
	// ApproveChanges and RejectChanges take.
	ID         string `json:"id"`
	Served     bool   `json:"served"`
	Approvable bool   `json:"approvable"`
	Reason     string `json:"reason"`
	Diff       string `json:"diff"`
}

// IntegrityGateway is a Gateway that pins what its backends offer. The
// integrity methods of the interface fail with ErrIntegrityOff on a
// Gateway that does not implement it.
type IntegrityGateway interface {
	// DiffChanges returns the unified diffs of the pending changes of
	// backend name that items names ("KIND:NAME", NAME or an ID; all when
	// empty), each headed by its ID.
	DiffChanges(name string, items []string) (string, error)
	// ReviewChanges returns those changes, each with its ID and diff.
	ReviewChanges(name string, items []string) ([]ReviewedChange, error)
	// ApproveChanges approves the changes items names by ID
	// ("KIND:NAME@FINGERPRINT"), exactly those versions, serves them at
	// once and returns the keys ("KIND:NAME") it approved. If one changed
	// since, it approves nothing and says so.
	ApproveChanges(ctx context.Context, name string, items []string) ([]string, error)
	// RejectChanges keeps the changes items names by ID held back and
	// stops reporting them; it returns the keys it rejected.
	RejectChanges(ctx context.Context, name string, items []string) ([]string, error)
	// ResetIntegrity treats an unreadable state file as no baseline.
	ResetIntegrity(ctx context.Context) error
}

// ActionAuthorizer is an Authorizer that tells polkit actions apart. An
// Authorizer that is not one decides every action as ManageAction.
type ActionAuthorizer interface {
	AuthorizeAction(ctx context.Context, sender, action string, interactive bool) error
}

// authorizeAction checks a call that needs action.
func (s *Server) authorizeAction(msg dbus.Message, action string) *dbus.Error {
	aa, ok := s.auth.(ActionAuthorizer)
	if !ok || s.auth == nil {
		return s.authorize(msg)
	}
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	interactive := msg.Flags&dbus.FlagAllowInteractiveAuthorization != 0
	return dbusError(aa.AuthorizeAction(s.ctx, sender, action, interactive))
}

func (s *Server) integrity() (IntegrityGateway, *dbus.Error) {
	ig, ok := s.gw.(IntegrityGateway)
	if !ok {
		return nil, dbusError(ErrIntegrityOff)
	}
	return ig, nil
}

// DiffChanges returns the diffs of the backend's pending changes that
// items names, all of them when items is empty. Reading is open.
func (b backendObject) DiffChanges(items []string) (string, *dbus.Error) {
	ig, derr := b.s.integrity()
	if derr != nil {
		return "", derr
	}
	if _, ok := b.s.gw.Backend(b.name); !ok {
		return "", noSuchBackend(b.name)
	}
	d, err := ig.DiffChanges(b.name, items)
	return d, dbusError(err)
}

// ReviewChanges returns the backend's pending changes that items names,
// all of them when items is empty, each with its ID and diff. Reading is
// open.
func (b backendObject) ReviewChanges(items []string) ([]ReviewedChange, *dbus.Error) {
	ig, derr := b.s.integrity()
	if derr != nil {
		return nil, derr
	}
	if _, ok := b.s.gw.Backend(b.name); !ok {
		return nil, noSuchBackend(b.name)
	}
	changes, err := ig.ReviewChanges(b.name, items)
	if err != nil {
		return nil, dbusError(err)
	}
	return nonNil(changes), nil
}

// ApproveChanges approves the backend's pending changes that items names
// by ID and returns what it approved.
func (b backendObject) ApproveChanges(msg dbus.Message, items []string) ([]string, *dbus.Error) {
	return b.decide(msg, items, func(ig IntegrityGateway) ([]string, error) { return ig.ApproveChanges(b.s.ctx, b.name, items) })
}

// RejectChanges rejects the backend's pending changes that items names
// by ID and returns what it rejected.
func (b backendObject) RejectChanges(msg dbus.Message, items []string) ([]string, *dbus.Error) {
	return b.decide(msg, items, func(ig IntegrityGateway) ([]string, error) { return ig.RejectChanges(b.s.ctx, b.name, items) })
}

func (b backendObject) decide(msg dbus.Message, items []string, fn func(IntegrityGateway) ([]string, error)) ([]string, *dbus.Error) {
	if err := b.s.authorizeAction(msg, ApproveAction); err != nil {
		return nil, err
	}
	ig, derr := b.s.integrity()
	if derr != nil {
		return nil, derr
	}
	if _, ok := b.s.gw.Backend(b.name); !ok {
		return nil, noSuchBackend(b.name)
	}
	keys, err := fn(ig)
	if err != nil {
		return nil, dbusError(err)
	}
	return nonNil(keys), nil
}

// ResetIntegrity moves an unreadable integrity state file aside and
// records a new baseline from what the backends offer now.
func (m managerObject) ResetIntegrity(msg dbus.Message) *dbus.Error {
	if err := m.s.authorizeAction(msg, ApproveAction); err != nil {
		return err
	}
	ig, derr := m.s.integrity()
	if derr != nil {
		return derr
	}
	return dbusError(ig.ResetIntegrity(m.s.ctx))
}

// DiffChanges returns the diffs of a backend's pending changes.
func (c *Client) DiffChanges(ctx context.Context, name string, items []string) (string, error) {
	path, err := c.backendPath(ctx, name)
	if err != nil {
		return "", err
	}
	var d string
	err = c.call(ctx, path, BackendInterface+".DiffChanges", 0, []any{nonNil(items)}, &d)
	return d, err
}

// ReviewChanges returns a backend's pending changes with their IDs and
// diffs; see IntegrityGateway.
func (c *Client) ReviewChanges(ctx context.Context, name string, items []string) ([]ReviewedChange, error) {
	path, err := c.backendPath(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []ReviewedChange
	err = c.call(ctx, path, BackendInterface+".ReviewChanges", 0, []any{nonNil(items)}, &out)
	return out, err
}

// ApproveChanges approves a backend's pending changes; see IntegrityGateway.
func (c *Client) ApproveChanges(ctx context.Context, name string, items []string) ([]string, error) {
	return c.decide(ctx, name, "ApproveChanges", items)
}

// RejectChanges rejects a backend's pending changes; see IntegrityGateway.
func (c *Client) RejectChanges(ctx context.Context, name string, items []string) ([]string, error) {
	return c.decide(ctx, name, "RejectChanges", items)
}

func (c *Client) decide(ctx context.Context, name, method string, items []string) ([]string, error) {
	path, err := c.backendPath(ctx, name)
	if err != nil {
		return nil, err
	}
	var flags dbus.Flags
	if c.Interactive {
		flags = dbus.FlagAllowInteractiveAuthorization
	}
	var keys []string
	err = c.call(ctx, path, BackendInterface+"."+method, flags, []any{nonNil(items)}, &keys)
	return keys, err
}

// ResetIntegrity asks the gateway to treat its unreadable integrity state
// file as no baseline.
func (c *Client) ResetIntegrity(ctx context.Context) error {
	return c.manage(ctx, ManagerPath, ManagerInterface+".ResetIntegrity")
}

// PendingChanges returns a backend's PendingChanges property.
func (c *Client) PendingChanges(ctx context.Context, name string) ([]PendingChange, error) {
	path, err := c.backendPath(ctx, name)
	if err != nil {
		return nil, err
	}
	var v dbus.Variant
	if err := c.call(ctx, path, propertiesInterface+".Get", 0, []any{BackendInterface, "PendingChanges"}, &v); err != nil {
		return nil, err
	}
	var out []PendingChange
	if err := v.Store(&out); err != nil {
		return nil, fmt.Errorf("property PendingChanges: %w", err)
	}
	return out, nil
}

func (c *Client) backendPath(ctx context.Context, name string) (dbus.ObjectPath, error) {
	var path dbus.ObjectPath
	err := c.call(ctx, ManagerPath, ManagerInterface+".GetBackend", 0, []any{name}, &path)
	return path, err
}

// AuthorizeAction implements ActionAuthorizer: as Authorize, asking polkit
// about action instead of ManageAction.
func (a *BusAuthorizer) AuthorizeAction(ctx context.Context, sender, action string, interactive bool) error {
	return a.authorize(ctx, sender, action, interactive)
}
