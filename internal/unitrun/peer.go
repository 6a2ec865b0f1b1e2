package unitrun

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5): a pidfd of the process that
// connected, taken when it connected. golang.org/x/sys does not name it
// yet; 77 is its value in asm-generic, which amd64 and arm64 use.
const soPeerPidfd = 77

// errPeerGone is a peer that exited before it was identified: its PID may
// name another process by then.
var errPeerGone = errors.New("it exited before it could be identified (its PID may belong to another process by now)")

// peerProcess is the process at the other end of a unix connection, pinned
// by a pidfd so that its PID cannot silently come to mean another process.
type peerProcess struct {
	pid   int32
	uid   uint32
	pidfd int
}

// close releases the pidfd.
func (p *peerProcess) close() { unix.Close(p.pidfd) }

// alive reports whether the pinned process still runs: while it does, its
// PID names it and no other. A pidfd becomes readable once its process
// has terminated; polling it needs no permission over the process.
func (p *peerProcess) alive() bool {
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 0
	}
}

// pinPeer returns the process that connected conn: its credentials from
// SO_PEERCRED and a pidfd of it. The pidfd comes from SO_PEERPIDFD, which
// the kernel took at connect time. Before Linux 6.5 it comes from
// pidfd_open on the PID right away, which leaves a short window: a peer
// that exits at once and whose PID is reused within it is not told apart.
func pinPeer(conn *net.UnixConn) (*peerProcess, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil {
			pidfd, credErr = peerPidfd(int(fd), int(cred.Pid))
		}
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, credErr
	}
	return &peerProcess{pid: cred.Pid, uid: cred.Uid, pidfd: pidfd}, nil
}

// peerPidfd returns a pidfd of the peer of socket fd, whose PID is pid.
func peerPidfd(fd, pid int) (int, error) {
	pidfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, soPeerPidfd)
	switch {
	case err == nil:
		return pidfd, nil
	case errors.Is(err, unix.ENOPROTOOPT), errors.Is(err, unix.EINVAL):
		// A kernel before 6.5.
	case errors.Is(err, unix.ESRCH):
		return -1, errPeerGone
	default:
		return -1, fmt.Errorf("SO_PEERPIDFD: %w", err)
	}
	pidfd, err = unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, errPeerGone
	}
	if err != nil {
		return -1, os.NewSyscallError("pidfd_open", err)
	}
	return pidfd, nil
}

// identifyPeer asks lookup what the peer process is, by PID, and makes
// sure the answer is about the process that connected: the pidfd pins it,
// and if it is still alive after the lookup, its PID named it, and no
// other process, throughout.
func identifyPeer[T any](p *peerProcess, lookup func(pid int32) (T, error)) (T, error) {
	v, err := lookup(p.pid)
	if err != nil {
		return v, err
	}
	if !p.alive() {
		var zero T
		return zero, errPeerGone
	}
	return v, nil
}
