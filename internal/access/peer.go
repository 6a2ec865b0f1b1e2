package access

import (
	"context"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// Peer is the other end of a client's connection.
type Peer struct {
	Addr string // remote address of a TCP connection, or the socket path
	// Cred is set for unix socket connections: the kernel's SO_PEERCRED.
	Cred *unix.Ucred
	// Groups are the supplementary groups of a unix peer, read once when
	// it connected.
	Groups []uint32
	// Local is the address of the listener the connection came to, as
	// net.Addr.String() gives it: "127.0.0.1:7431" or the socket path.
	Local string
	// identity is the Caller.Identity of a unix peer, "uid:UID".
	identity string
}

// String names the peer for logs: "uid 1000 pid 4242" or "127.0.0.1:5555".
func (p Peer) String() string {
	if p.Cred != nil {
		return "uid " + strconv.Itoa(int(p.Cred.Uid)) + " pid " + strconv.Itoa(int(p.Cred.Pid))
	}
	return p.Addr
}

// callerIdentity is the Caller.Identity of a unix peer: computed once
// per connection by ConnContext.
func (p Peer) callerIdentity() string {
	if p.identity == "" && p.Cred != nil {
		return "uid:" + strconv.Itoa(int(p.Cred.Uid))
	}
	return p.identity
}

// key identifies the peer for counting failures: the uid of a unix peer,
// the host of a TCP one (its port changes with every connection).
func (p Peer) key() string {
	if p.Cred != nil {
		return "uid:" + strconv.Itoa(int(p.Cred.Uid))
	}
	if host, _, err := net.SplitHostPort(p.Addr); err == nil {
		return host
	}
	return p.Addr
}

type peerKey struct{}

// ConnContext is an http.Server ConnContext: it records the connection's
// peer, with the peer credentials of a unix socket, which the kernel took
// when the client connected.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	p := Peer{}
	if a := c.RemoteAddr(); a != nil {
		p.Addr = a.String()
	}
	if a := c.LocalAddr(); a != nil {
		p.Local = a.String()
	}
	if uc, ok := c.(*net.UnixConn); ok {
		if p.Addr == "" || p.Addr == "@" {
			p.Addr = uc.LocalAddr().String()
		}
		if raw, err := uc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					p.Cred = cred
				}
			})
		}
		if p.Cred != nil {
			p.Groups = peerGroups(p.Cred.Uid, p.Cred.Pid)
			p.identity = "uid:" + strconv.Itoa(int(p.Cred.Uid))
		}
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the peer ConnContext recorded in ctx; the zero Peer if
// none.
func PeerFrom(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}
