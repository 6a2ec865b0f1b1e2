package mcphttp

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// PeerCred is the process that accepted a connection on a unix socket,
// as the kernel recorded it (SO_PEERCRED) when the connection was made.
type PeerCred struct {
	PID, UID, GID uint32
}

// UnixDialer makes every connection of an HTTP transport to one unix
// socket, whatever host the request names, and remembers the peer
// credentials of the server process behind the last one. Its methods are
// safe for concurrent use.
type UnixDialer struct {
	Path string // the socket's path
	peer atomic.Pointer[PeerCred]
}

// DialContext connects to the socket; network and addr are ignored. It
// is an http.Transport's DialContext.
func (d *UnixDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	nd := net.Dialer{Timeout: 10 * time.Second}
	c, err := nd.DialContext(ctx, "unix", d.Path)
	if err != nil {
		return nil, err
	}
	if uc, ok := c.(*net.UnixConn); ok {
		if cred, ok := peerCred(uc); ok {
			d.peer.Store(&cred)
		}
	}
	return c, nil
}

// Peer returns the credentials of the process behind the last connection
// made, and false before one was made.
func (d *UnixDialer) Peer() (PeerCred, bool) {
	p := d.peer.Load()
	if p == nil {
		return PeerCred{}, false
	}
	return *p, true
}

// Transport returns an HTTP transport whose connections, at most max at
// once, all go to the socket. Plain HTTP/1.1: what is on the other end is
// a local process, not an origin TLS could authenticate.
func (d *UnixDialer) Transport(max int) *http.Transport {
	return &http.Transport{
		DialContext:         d.DialContext,
		MaxConnsPerHost:     max,
		MaxIdleConnsPerHost: max,
		IdleConnTimeout:     90 * time.Second,
	}
}

func peerCred(uc *net.UnixConn) (PeerCred, bool) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return PeerCred{}, false
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cred == nil {
		return PeerCred{}, false
	}
	return PeerCred{PID: uint32(cred.Pid), UID: cred.Uid, GID: cred.Gid}, true
}
