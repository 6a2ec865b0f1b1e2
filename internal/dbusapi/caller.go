package dbusapi

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/unixuser"
)

// OutputAuthorizer decides who may read what backends printed (StderrTail):
// it may carry tokens and other secrets, so only those who may read the
// journal anyway see it. A Server whose Authorizer does not implement it
// shows StderrTail to nobody.
type OutputAuthorizer interface {
	// MayReadOutput returns nil when sender may read backend output, or an
	// error wrapping ErrAccessDenied that says why not.
	MayReadOutput(ctx context.Context, sender string) error
}

// OutputGroups are the groups whose members may read backend output
// besides root and the gateway's own user: those who may read the journal.
func OutputGroups() []string { return []string{"adm", "systemd-journal"} }

// caller is what the bus knows of a method call's sender.
type caller struct {
	uid    uint32
	pid    uint32
	groups []uint32 // nil if the bus did not say
	pidfd  int      // pins the process of pid (pinCaller); -1 if none
}

// close releases what identify opened.
func (c caller) close() {
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
	}
}

// identify asks the bus who sender is.
func (a *BusAuthorizer) identify(ctx context.Context, sender string) (caller, error) {
	var creds map[string]dbus.Variant
	err := a.Bus.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetConnectionCredentials", 0, sender).Store(&creds)
	if err != nil {
		var uid uint32
		if err := a.Bus.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetConnectionUnixUser", 0, sender).Store(&uid); err != nil {
			return caller{}, fmt.Errorf("%w: cannot tell the uid of %s: %v", ErrAccessDenied, sender, err)
		}
		return caller{uid: uid, pidfd: -1}, nil
	}
	return a.callerOf(ctx, sender, creds)
}

// callerOf is the caller of the bus's credentials creds of sender. Without
// the bus's ProcessFD, the process a pidfd opened on its PID pins counts
// only if it is the one that connected: of the connection's uid, and
// started before the connection appeared on the bus (connections); else
// the caller's process cannot be told (pidfd -1), and so it is never
// taken for root or the gateway's own user.
func (a *BusAuthorizer) callerOf(ctx context.Context, sender string, creds map[string]dbus.Variant) (caller, error) {
	c := caller{pidfd: -1}
	c.pid, _ = creds["ProcessID"].Value().(uint32)
	var byBus bool
	c.pidfd, byBus = pinCaller(creds, c.pid) // first: it closes a ProcessFD it does not keep
	uid, ok := creds["UnixUserID"].Value().(uint32)
	if !ok {
		c.close()
		return caller{}, fmt.Errorf("%w: the bus does not say the uid of %s", ErrAccessDenied, sender)
	}
	c.uid = uid
	c.groups, _ = creds["UnixGroupIDs"].Value().([]uint32)
	if c.pidfd >= 0 && !byBus && !a.connectedBy(ctx, sender, c) {
		unix.Close(c.pidfd)
		c.pidfd = -1
	}
	return c, nil
}

// connectedBy reports whether the process of c.pid, pinned now, can be
// the one that made the connection sender.
func (a *BusAuthorizer) connectedBy(ctx context.Context, sender string, c caller) bool {
	start, euid, ok := processStart(int(c.pid))
	if !ok || euid != c.uid {
		return false
	}
	if a.conns == nil {
		return true // a bus whose names are not watched: as before
	}
	at, old, known := a.conns.appeared(ctx, sender)
	return old || known && start <= at
}

// isSelf reports whether c is the gateway's own user and not one of its
// backends: a backend runs as that user too, but must not count as the
// gateway itself.
func (a *BusAuthorizer) isSelf(c caller) bool {
	return c.uid == a.Self && !a.isBackend(c)
}

// isBackend reports whether c is the gateway's descendant, i.e. a
// backend or a process a backend started. A caller whose process cannot
// be told counts as one, to be safe: no PID, or a process that is gone, or
// that ended while its ancestors were looked up, since its PID may name
// another process by then.
func (a *BusAuthorizer) isBackend(c caller) bool {
	if a.Ancestor <= 0 {
		return false
	}
	if c.pid == 0 || c.pidfd < 0 {
		return true
	}
	descends := descendsFrom(int(c.pid), a.Ancestor)
	return descends || !pidfdAlive(c.pidfd)
}

// descendsFrom reports whether pid is ancestor or one of its descendants;
// a process whose line cannot be followed counts as one.
func descendsFrom(pid, ancestor int) bool {
	p := pid
	for range 4096 { // a bound against a cycle read from a changing /proc
		if p == ancestor {
			return true
		}
		if p <= 1 {
			return false
		}
		ppid, err := parentPID(p)
		if err != nil {
			return true // gone: cannot tell, so not trusted
		}
		p = ppid
	}
	return true
}

// parentPID reads the parent of pid from /proc.
func parentPID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name in parentheses may hold spaces and ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.Atoi(f[1])
}

// MayReadOutput implements OutputAuthorizer: root, the gateway's own user
// (not its backends) and members of OutputGroups may read.
func (a *BusAuthorizer) MayReadOutput(ctx context.Context, sender string) error {
	c, err := a.identify(ctx, sender)
	if err != nil {
		return err
	}
	defer c.close()
	if c.uid == 0 || a.isSelf(c) {
		return nil
	}
	groups := c.groups
	if groups == nil {
		groups = unixuser.Groups(c.uid)
	}
	for _, name := range OutputGroups() {
		g, err := user.LookupGroup(name)
		if err != nil {
			continue
		}
		gid, _ := strconv.ParseUint(g.Gid, 10, 32)
		for _, have := range groups {
			if have == uint32(gid) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: what backends print may hold secrets; only root, the gateway's user and members of %s may read it (as they may read the journal)",
		ErrAccessDenied, strings.Join(OutputGroups(), " or "))
}
