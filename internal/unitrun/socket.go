package unitrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/mcpgate/mcpgate/internal/journal"
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
			r.refuse(conn, "busy", "too many connections being identified; closed one")
		}
	}
}

// identify hands conn to the start waiting for its unit, or refuses it.
// The unit comes from systemd's GetUnitByPID, asked about a process the
// pidfd pins (pinPeer), so a peer that exits and whose PID goes to a
// backend being started is refused, not taken for it.
func (r *Runner) identify(conn *net.UnixConn) {
	p, err := pinPeer(conn)
	if err != nil {
		r.refuse(conn, "uid ?", "refused a connection: "+err.Error())
		return
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), identifyTimeout)
	defer cancel()
	path, err := identifyPeer(p, func(pid int32) (dbus.ObjectPath, error) {
		var path dbus.ObjectPath
		err := r.bus.Object(systemdName, systemdPath).CallWithContext(ctx, managerIface+".GetUnitByPID", 0, uint32(pid)).Store(&path)
		if err != nil {
			return "", fmt.Errorf("systemd does not know its unit: %w", err)
		}
		return path, nil
	})
	r.mu.Lock()
	ch, ok := r.starting[path]
	if ok && err == nil {
		delete(r.starting, path)
	}
	r.mu.Unlock()
	if err != nil || !ok {
		why := "its unit is no backend this gateway is starting"
		if err != nil {
			why = err.Error()
		}
		r.refuse(conn, fmt.Sprintf("uid %d", p.uid), fmt.Sprintf("refused a connection from PID %d (uid %d): %s", p.pid, p.uid, why),
			"peer_pid", p.pid, "peer_uid", p.uid)
		return
	}
	ch <- peer{conn: conn, pid: int(p.pid)} // buffered; only its start reads it
}

// Bounds of the journal entries of refused connections: whoever may
// connect must not be able to fill journald's rate limit with them.
const (
	refusalWindow  = time.Minute
	refusalsPerUID = 5  // journaled per peer uid and window
	refusalsTotal  = 20 // journaled per window over all peers
	refusalUIDs    = 1024
)

// refuse journals why conn is refused, within the refusal limits (the
// refusals beyond them are counted and reported with the next entry of the
// same peer), and then closes it.
func (r *Runner) refuse(conn *net.UnixConn, peer, msg string, attrs ...any) {
	defer conn.Close()
	log, suppressed, last := r.refusals.Allow(peer, time.Now())
	if !log {
		return
	}
	attrs = append(attrs, journal.MessageAccessDenied.Attr())
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	if last {
		attrs = append(attrs, "note", "further refusals within a minute are counted, not logged")
	}
	r.log.Warn("backend socket: "+msg, attrs...)
}
