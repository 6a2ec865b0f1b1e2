package dbusapi

import (
	"context"
	"fmt"
	"os"

	"github.com/godbus/dbus/v5"
)

// Authorizer decides whether the sender of a method call may change the
// gateway: start, stop or restart backends, or reload. Reading is open to
// everyone and never asks it.
type Authorizer interface {
	// Authorize returns nil when sender, the caller's unique bus name, may
	// call a mutating method, or an error wrapping ErrAccessDenied that
	// says why not. interactive is true when the caller set
	// ALLOW_INTERACTIVE_AUTHORIZATION on its call, allowing a password
	// prompt.
	Authorize(ctx context.Context, sender string, interactive bool) error
}

// Polkit's names.
const (
	polkitName      = "org.freedesktop.PolicyKit1"
	polkitPath      = "/org/freedesktop/PolicyKit1/Authority"
	polkitCheck     = "org.freedesktop.PolicyKit1.Authority.CheckAuthorization"
	polkitAllowUser = 1 // CheckAuthorizationFlags.AllowUserInteraction
)

// BusAuthorizer is the Authorizer the daemon uses. It asks the bus for the
// caller's uid and allows uid 0 and Self, the gateway's own uid (so that the
// service's own ExecReload=, running as the service user, may call Reload),
// unless the caller descends from Ancestor: a backend runs as the gateway's
// user but is not the gateway. Anyone else is allowed only when Polkit is
// set and polkit's CheckAuthorization grants ManageAction to the caller,
// subject system-bus-name; when polkit is missing or fails, they are
// denied.
type BusAuthorizer struct {
	Bus    *dbus.Conn
	Self   uint32 // the gateway's own uid, allowed like root
	Polkit bool   // ask polkit about other callers; only meaningful on the system bus
	// Ancestor is the gateway's pid: its descendants (backends and what
	// they start) are never Self. 0 trusts every process of Self.
	Ancestor int
	// conns notes when connections appeared, for buses that send no
	// ProcessFD (see connections); nil: not watched.
	conns *connections
}

// NewBusAuthorizer returns a BusAuthorizer for the process's own uid and
// pid that asks polkit on bus when usePolkit is set.
func NewBusAuthorizer(bus *dbus.Conn, usePolkit bool) *BusAuthorizer {
	return &BusAuthorizer{Bus: bus, Self: uint32(os.Getuid()), Polkit: usePolkit, Ancestor: os.Getpid(), conns: watchConnections(bus)}
}

// Authorize implements Authorizer.
func (a *BusAuthorizer) Authorize(ctx context.Context, sender string, interactive bool) error {
	return a.authorize(ctx, sender, ManageAction, interactive)
}

func (a *BusAuthorizer) authorize(ctx context.Context, sender, action string, interactive bool) error {
	c, err := a.identify(ctx, sender)
	if err != nil {
		return err
	}
	defer c.close()
	uid := c.uid
	backend := a.isBackend(c)
	if (uid == 0 && !backend) || a.isSelf(c) {
		return nil
	}
	if !a.Polkit {
		if backend {
			return fmt.Errorf("%w: pid %d is a backend of the gateway (or was started by one), and backends may not control the gateway", ErrAccessDenied, c.pid)
		}
		return fmt.Errorf("%w: uid %d is neither root nor the gateway's own user", ErrAccessDenied, uid)
	}
	ok, challenge, err := a.checkPolkit(ctx, sender, action, interactive)
	switch {
	case err != nil:
		return fmt.Errorf("%w: uid %d is not root and polkit could not be asked about %s: %v", ErrAccessDenied, uid, action, err)
	case ok:
		return nil
	case challenge:
		return fmt.Errorf("%w: %s needs authentication; call again allowing interactive authorization, with a polkit agent running", ErrAccessDenied, action)
	}
	return fmt.Errorf("%w: polkit does not allow uid %d %s", ErrAccessDenied, uid, action)
}

// checkPolkit asks polkit whether sender may perform action.
func (a *BusAuthorizer) checkPolkit(ctx context.Context, sender, action string, interactive bool) (ok, challenge bool, err error) {
	subject := struct {
		Kind    string
		Details map[string]dbus.Variant
	}{"system-bus-name", map[string]dbus.Variant{"name": dbus.MakeVariant(sender)}}
	var flags uint32
	if interactive {
		flags = polkitAllowUser
	}
	var result struct {
		Authorized, Challenge bool
		Details               map[string]string
	}
	err = a.Bus.Object(polkitName, polkitPath).CallWithContext(ctx, polkitCheck, 0,
		subject, action, map[string]string{}, flags, "").Store(&result)
	return result.Authorized, result.Challenge, err
}
