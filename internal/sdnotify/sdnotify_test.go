package sdnotify

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// waitFor bounds every wait for an event; nothing in these tests sleeps.
const waitFor = 5 * time.Second

// notifySocket is a service manager's notify socket: a unixgram listener.
type notifySocket struct {
	addr string // as in $NOTIFY_SOCKET
	conn *net.UnixConn
}

// listenNotify listens on a socket file in t.TempDir().
func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	return listenNotifyAt(t, filepath.Join(t.TempDir(), "notify"))
}

// listenNotifyAt listens on addr, a path or an @abstract name.
func listenNotifyAt(t *testing.T, addr string) *notifySocket {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen on notify socket %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{addr: addr, conn: conn}
}

// next returns the next datagram, failing the test if none arrives in time.
func (s *notifySocket) next(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := s.conn.SetReadDeadline(time.Now().Add(waitFor)); err != nil {
		t.Fatal(err)
	}
	n, err := s.conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification within %v: %v", waitFor, err)
	}
	return string(buf[:n])
}

// pending returns the datagram already queued on the socket, if any, without
// waiting. (A read deadline in the past would not do: it fails even when data
// is queued.)
func (s *notifySocket) pending(t *testing.T) (string, bool) {
	t.Helper()
	raw, err := s.conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var n int
	var rerr error
	if err := raw.Control(func(fd uintptr) {
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
	}); err != nil {
		t.Fatal(err)
	}
	if errors.Is(rerr, unix.EAGAIN) {
		return "", false
	}
	if rerr != nil {
		t.Fatalf("recv on notify socket: %v", rerr)
	}
	return string(buf[:n]), true
}

// expectNone fails the test if a datagram is queued.
func (s *notifySocket) expectNone(t *testing.T) {
	t.Helper()
	if msg, ok := s.pending(t); ok {
		t.Fatalf("unexpected notification %q", msg)
	}
}

func TestMessages(t *testing.T) {
	sock := listenNotify(t)
	n := New(sock.addr, nil)
	tests := []struct {
		name string
		send func() error
		want string
	}{
		{"Ready", n.Ready, "READY=1"},
		{"Stopping", n.Stopping, "STOPPING=1"},
		{"Watchdog", n.Watchdog, "WATCHDOG=1"},
		{"Status", func() error { return n.Status("5/6 backends healthy, 42 tools; github restarting (2/5)") },
			"STATUS=5/6 backends healthy, 42 tools; github restarting (2/5)"},
		{"Status one line", func() error { return n.Status("bad config\nREADY=1\r\nx\ry") },
			"STATUS=bad config READY=1 x y"},
		{"Status empty", func() error { return n.Status("") }, "STATUS="},
		{"ExtendTimeout", func() error { return n.ExtendTimeout(90 * time.Second) }, "EXTEND_TIMEOUT_USEC=90000000"},
		{"ExtendTimeout rounds down", func() error { return n.ExtendTimeout(1500 * time.Nanosecond) }, "EXTEND_TIMEOUT_USEC=1"},
		{"Errno", func() error { return n.Errno(int(unix.ENOENT)) }, "ERRNO=2"},
		{"Send", func() error {
			sent, err := n.Send("STATUS=backend github failed", "ERRNO=5")
			if !sent && err == nil {
				return errors.New("Send reported not sent without error")
			}
			return err
		}, "STATUS=backend github failed\nERRNO=5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.send(); err != nil {
				t.Fatalf("send: %v", err)
			}
			if got := sock.next(t); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReloadingCarriesMonotonicTime(t *testing.T) {
	sock := listenNotify(t)
	n := New(sock.addr, nil)
	before := monotonicUsec()
	if err := n.Reloading(); err != nil {
		t.Fatal(err)
	}
	after := monotonicUsec()
	msg := sock.next(t)
	lines := strings.Split(msg, "\n")
	if len(lines) != 2 || lines[0] != "RELOADING=1" || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") {
		t.Fatalf("got %q, want RELOADING=1 and MONOTONIC_USEC=… in one datagram", msg)
	}
	usec, err := strconv.ParseInt(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64)
	if err != nil {
		t.Fatalf("MONOTONIC_USEC in %q: %v", msg, err)
	}
	if usec < before || usec > after || usec <= 0 {
		t.Errorf("MONOTONIC_USEC=%d, want within [%d, %d] (CLOCK_MONOTONIC around the call)", usec, before, after)
	}
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "notify") }},
		{"abstract", func(t *testing.T) string {
			return fmt.Sprintf("@mcpgate-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := listenNotifyAt(t, tt.addr(t))
			t.Setenv("NOTIFY_SOCKET", sock.addr)
			n := FromEnv(nil)
			if v, ok := os.LookupEnv("NOTIFY_SOCKET"); ok {
				t.Errorf("NOTIFY_SOCKET=%q still set after FromEnv; children would inherit it", v)
			}
			if !n.Enabled() {
				t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
			}
			sent, err := n.Send("READY=1")
			if !sent || err != nil {
				t.Fatalf("Send = (%v, %v), want (true, nil)", sent, err)
			}
			if got := sock.next(t); got != "READY=1" {
				t.Errorf("got %q, want READY=1", got)
			}
			// A second FromEnv finds nothing: the socket is captured once.
			if FromEnv(nil).Enabled() {
				t.Error("second FromEnv is enabled; want NOTIFY_SOCKET consumed by the first")
			}
		})
	}
}

func TestNoSocketIsSilent(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	h := &testutil.LogRecorder{}
	for name, n := range map[string]*Notifier{
		"FromEnv": FromEnv(slog.New(h)),
		"New":     New("", slog.New(h)),
		"nil":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			if n.Enabled() {
				t.Error("Enabled() = true without a socket")
			}
			if sent, err := n.Send("READY=1"); sent || err != nil {
				t.Errorf("Send = (%v, %v), want (false, nil)", sent, err)
			}
			for _, f := range []func() error{n.Ready, n.Reloading, n.Stopping, n.Watchdog,
				func() error { return n.Status("x") }, func() error { return n.Errno(1) },
				func() error { return n.ExtendTimeout(time.Second) }} {
				if err := f(); err != nil {
					t.Errorf("got %v, want nil", err)
				}
			}
		})
	}
	if msgs := h.Messages(); len(msgs) != 0 {
		t.Errorf("logged %q without a socket, want nothing", msgs)
	}
}

func TestFailureIsLoggedOnce(t *testing.T) {
	sock := listenNotify(t)
	h := &testutil.LogRecorder{}
	n := New(sock.addr, slog.New(h))
	if err := n.Ready(); err != nil {
		t.Fatal(err)
	}
	sock.next(t)
	sock.conn.Close() // the service manager goes away

	for i := range 3 {
		sent, err := n.Send("WATCHDOG=1")
		if sent || err == nil {
			t.Fatalf("send %d: Send = (%v, %v), want (false, error)", i, sent, err)
		}
		if !strings.Contains(err.Error(), sock.addr) || !strings.Contains(err.Error(), "WATCHDOG") {
			t.Errorf("error %q does not name the socket and the variable", err)
		}
	}
	if err := n.Status("still broken"); err == nil {
		t.Error("Status on a dead socket returned nil")
	}
	msgs := h.Messages()
	if len(msgs) != 1 {
		t.Fatalf("logged %d messages, want 1: %q", len(msgs), msgs)
	}
	if !strings.HasPrefix(msgs[0], "WARN ") || !strings.Contains(msgs[0], sock.addr) {
		t.Errorf("log %q: want a warning naming the socket", msgs[0])
	}
}

func TestSendRejects(t *testing.T) {
	tests := []struct {
		name   string
		socket string
		send   func(n *Notifier) error
		logged bool
	}{
		{"no state", "/run/systemd/notify", func(n *Notifier) error { return errOnly(n.Send()) }, false},
		{"zero extension", "/run/systemd/notify", func(n *Notifier) error { return n.ExtendTimeout(0) }, false},
		{"relative socket", "run/notify", (*Notifier).Ready, true},
		{"vsock socket", "vsock:2:1234", (*Notifier).Ready, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &testutil.LogRecorder{}
			err := tt.send(New(tt.socket, slog.New(h)))
			if err == nil {
				t.Fatal("got nil error")
			}
			if logged := len(h.Messages()) > 0; logged != tt.logged {
				t.Errorf("logged = %v, want %v (%q)", logged, tt.logged, h.Messages())
			}
		})
	}
}
