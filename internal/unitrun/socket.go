package unitrun

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

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
