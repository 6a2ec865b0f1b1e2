// Package sdnotify tells systemd about the daemon's state over the sd_notify(3) protocol.
package sdnotify

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Notifier sends state notifications to the service manager's notify socket.
// It is made once at start-up (FromEnv) and is safe for concurrent use.
// A nil *Notifier, or one without a socket, sends nothing and reports no error.
type Notifier struct {
	socket string // "" = not run under a service manager
	log    *slog.Logger
	// failed is set by the first failing send; later failures are not logged
	// so a broken socket cannot flood the log from a watchdog or status loop.
	failed atomic.Bool
}

// FromEnv returns a Notifier for the socket in $NOTIFY_SOCKET and removes the
// variable from the process environment, so child processes (backends) never
// see it and cannot send notifications in the daemon's name. Call it once,
// early: a second call finds the variable gone and returns a Notifier that
// sends nothing. Messages about failing sends go to log (slog.Default if nil).
func FromEnv(log *slog.Logger) *Notifier {
	socket := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	return New(socket, log)
}

// New returns a Notifier for socket, an absolute path or an "@"-prefixed
// abstract socket name as found in $NOTIFY_SOCKET. An empty socket gives a
// Notifier that sends nothing. It does not touch the environment.
func New(socket string, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.Default()
	}
	return &Notifier{socket: socket, log: log}
}

// Enabled reports whether the Notifier has a socket to send to, that is
// whether the daemon runs under a service manager that wants notifications.
func (n *Notifier) Enabled() bool { return n != nil && n.socket != "" }

// Send sends the assignments in state ("READY=1", "STATUS=…") to the service
// manager in one datagram, one assignment per line. It returns:
//   - (false, nil) when there is no socket: not run by systemd, nothing to do;
//   - (false, err) when the socket is unusable or the send failed; the first
//     such failure of the Notifier is logged, later ones only returned;
//   - (true, nil) when the datagram was sent.
//
// Send with no state returns (false, err) without sending or logging.
// Assignments must not contain newlines; Status takes care of that for text.
func (n *Notifier) Send(state ...string) (bool, error) {
	if !n.Enabled() {
		return false, nil
	}
	if len(state) == 0 {
		return false, errors.New("sd_notify: no state to send")
	}
	err := n.send(strings.Join(state, "\n"))
	if err != nil {
		err = fmt.Errorf("sd_notify %s to %s: %w", names(state), n.socket, err)
		if n.failed.CompareAndSwap(false, true) {
			n.log.Warn("cannot notify the service manager; further failures are not logged",
				"socket", n.socket, "err", err)
		}
		return false, err
	}
	return true, nil
}

func (n *Notifier) send(msg string) error {
	if n.socket[0] != '/' && n.socket[0] != '@' {
		return fmt.Errorf("unsupported NOTIFY_SOCKET %q: want an absolute path or an @abstract name", n.socket)
	}
	// A fresh socket per message, like sd_notify(3): it keeps working when the
	// service manager re-executes and binds its notify socket anew.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(msg))
	return err
}

// names returns the variable names of the assignments in state, for errors.
func names(state []string) string {
	keys := make([]string, len(state))
	for i, s := range state {
		keys[i], _, _ = strings.Cut(s, "=")
	}
	return strings.Join(keys, ",")
}

// errOnly drops Send's first result for the helpers below: nil when sent or
// when there is no socket, the error when sending failed.
func errOnly(_ bool, err error) error { return err }

// Ready sends READY=1: start-up or a reload finished. It returns nil when sent
// or when there is no socket, and the error (see Send) when sending failed.
func (n *Notifier) Ready() error { return errOnly(n.Send("READY=1")) }

// Reloading sends RELOADING=1 with MONOTONIC_USEC set to CLOCK_MONOTONIC now,
// in one datagram, as Type=notify-reload requires. Send Ready when the reload
// is done, whether or not it succeeded. It returns nil when sent or when there
// is no socket, and the error (see Send) when sending failed.
func (n *Notifier) Reloading() error {
	return errOnly(n.Send("RELOADING=1", "MONOTONIC_USEC="+strconv.FormatInt(monotonicUsec(), 10)))
}

// Stopping sends STOPPING=1: shutdown has begun. It returns nil when sent or
// when there is no socket, and the error (see Send) when sending failed.
func (n *Notifier) Stopping() error { return errOnly(n.Send("STOPPING=1")) }

// Status sends STATUS=status, the one line systemctl status shows. Line breaks
// in status become spaces so the text cannot inject other assignments. It
// returns nil when sent or when there is no socket, and the error (see Send)
// when sending failed.
func (n *Notifier) Status(status string) error {
	return errOnly(n.Send("STATUS=" + strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(status)))
}

// Watchdog sends WATCHDOG=1 unconditionally; Watchdog.Run sends it only while
// the daemon is alive. It returns nil when sent or when there is no socket,
// and the error (see Send) when sending failed.
func (n *Notifier) Watchdog() error { return errOnly(n.Send("WATCHDOG=1")) }

// ExtendTimeout sends EXTEND_TIMEOUT_USEC: the current start-up, reload or
// stop may take d longer from now (rounded down to microseconds). Send it again
// before d runs out to extend further. It returns nil when sent or when there
// is no socket, an error without sending when d is below one microsecond, and
// the error (see Send) when sending failed.
func (n *Notifier) ExtendTimeout(d time.Duration) error {
	if d < time.Microsecond {
		return fmt.Errorf("sd_notify EXTEND_TIMEOUT_USEC: duration %v is below one microsecond", d)
	}
	return errOnly(n.Send("EXTEND_TIMEOUT_USEC=" + strconv.FormatInt(d.Microseconds(), 10)))
}

// Errno sends ERRNO=errno, the errno-style reason the daemon is failing; send
// it with or after a Status saying why in words. It returns nil when sent or
// when there is no socket, and the error (see Send) when sending failed.
func (n *Notifier) Errno(errno int) error { return errOnly(n.Send("ERRNO=" + strconv.Itoa(errno))) }

// monotonicUsec returns CLOCK_MONOTONIC in microseconds, the clock systemd
// compares MONOTONIC_USEC against.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC cannot fail on Linux; 0 makes systemd ignore the field.
		return 0
	}
	return ts.Sec*1_000_000 + ts.Nsec/1_000
}
