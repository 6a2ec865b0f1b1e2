package listeners

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// waitFor bounds every wait for an event; nothing in these tests sleeps.
const waitFor = 10 * time.Second

// roundTrip connects to l's address, has l accept, and checks bytes pass.
func roundTrip(t *testing.T, l net.Listener) {
	t.Helper()
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, err = c.Write([]byte("hello\n"))
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.DialTimeout(l.Addr().Network(), l.Addr().String(), waitFor)
	if err != nil {
		t.Fatalf("connect to %s: %v", l.Addr(), err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("read from %s: %q, %v", l.Addr(), got, err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept on %s: %v", l.Addr(), err)
	}
}

// staleSocket leaves a socket file at path that nothing listens on.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}

func isSocket(t *testing.T, path string) bool {
	t.Helper()
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Type() == fs.ModeSocket
}

func TestBind(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "mcpgate", "mcpgate.sock") // parents missing
	set, err := Bind([]string{"127.0.0.1:0", "unix:" + sock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	if set.Activated {
		t.Error("Activated = true for bound sockets")
	}
	if len(set.Listeners) != 2 {
		t.Fatalf("got %d listeners, want 2", len(set.Listeners))
	}
	if got := set.Listeners[0].Name; got != "127.0.0.1:0" {
		t.Errorf("Name = %q, want the configured address", got)
	}
	if got := set.Listeners[1].Name; got != "unix:"+sock {
		t.Errorf("Name = %q, want the configured address", got)
	}
	for _, l := range set.Listeners {
		roundTrip(t, l)
	}

	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket file mode %v, want socket 0660", fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(sock))
	if err != nil {
		t.Fatal(err)
	}
	if perm := di.Mode().Perm(); perm&0o700 != 0o700 || perm&^0o755 != 0 {
		t.Errorf("created directory mode %v, want 0755 less the umask", perm)
	}

	if err := set.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if isSocket(t, sock) {
		t.Error("socket file we created is still there after Close")
	}
	if err := set.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}

func TestBindReplacesStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mcpgate.sock")
	staleSocket(t, sock)
	set, err := Bind([]string{"unix:" + sock})
	if err != nil {
		t.Fatalf("Bind over a stale socket: %v", err)
	}
	t.Cleanup(func() { set.Close() })
	roundTrip(t, set.Listeners[0])
}

func TestBindRefuses(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string) // prepares what is at path
		listen  func(path string) []string
		wantErr string
		keep    bool // the file at path must survive
	}{
		{
			name: "live socket",
			setup: func(t *testing.T, path string) {
				l, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
			},
			wantErr: "another instance is listening on ",
			keep:    true,
		},
		{
			name: "not a socket",
			setup: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "exists and is not a socket",
			keep:    true,
		},
		{
			name:    "relative path",
			listen:  func(string) []string { return []string{"unix:run/mcpgate.sock"} },
			wantErr: "must be absolute",
		},
		{
			name:    "no port",
			listen:  func(string) []string { return []string{"127.0.0.1"} },
			wantErr: "want host:port",
		},
		{
			name:    "nothing to listen on",
			listen:  func(string) []string { return nil },
			wantErr: "no listen addresses",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcpgate.sock")
			if tt.setup != nil {
				tt.setup(t, path)
			}
			listen := []string{"unix:" + path}
			if tt.listen != nil {
				listen = tt.listen(path)
			}
			set, err := Bind(listen)
			if err == nil {
				set.Close()
				t.Fatal("Bind succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q, want it to say %q", err, tt.wantErr)
			}
			if tt.keep {
				if _, err := os.Lstat(path); err != nil {
					t.Errorf("the file Bind refused to replace is gone: %v", err)
				}
			}
		})
	}
}

func TestBindFailureClosesEarlierListeners(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "first.sock")
	set, err := Bind([]string{"unix:" + sock, "unix:relative.sock"})
	if err == nil {
		set.Close()
		t.Fatal("Bind succeeded")
	}
	if isSocket(t, sock) {
		t.Error("the first socket is still there after Bind failed on the second")
	}
}

// socketFile returns a new socket of the given type as an *os.File named name,
// listening if listen is set.
func socketFile(t *testing.T, name string, domain, typ int, listen bool) (*os.File, string) {
	t.Helper()
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	switch domain {
	case unix.AF_INET:
		err = unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
		if err == nil {
			var sa unix.Sockaddr
			sa, err = unix.Getsockname(fd)
			addr = fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
		}
	case unix.AF_UNIX:
		addr = filepath.Join(t.TempDir(), "s")
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: addr})
	}
	if err == nil && listen {
		err = unix.Listen(fd, 8)
	}
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), name)
	t.Cleanup(func() { f.Close() })
	return f, addr
}

// connectedFile returns one end of a connected unix stream socket pair, as
// systemd passes a connection with Accept=yes.
func connectedFile(t *testing.T, name string) *os.File {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), name)
	t.Cleanup(func() { f.Close() })
	return f
}

func regularFile(t *testing.T, name string) *os.File {
	t.Helper()
	fd, err := unix.Open(filepath.Join(t.TempDir(), "regular"), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), name)
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFromFilesRefuses(t *testing.T) {
	tests := []struct {
		name    string
		files   func(t *testing.T) []*os.File
		wantErr []string
	}{
		{
			name:    "Accept=yes connection named http",
			files:   func(t *testing.T) []*os.File { return []*os.File{connectedFile(t, "http")} },
			wantErr: []string{"connected socket", "Accept=yes", "set Accept=no in mcpgate.socket"},
		},
		{
			name:    "Accept=yes connection with systemd's default name",
			files:   func(t *testing.T) []*os.File { return []*os.File{connectedFile(t, "connection")} },
			wantErr: []string{"set Accept=no in mcpgate.socket"},
		},
		{
			name: "datagram socket",
			files: func(t *testing.T) []*os.File {
				f, _ := socketFile(t, "http", unix.AF_INET, unix.SOCK_DGRAM, false)
				return []*os.File{f}
			},
			wantErr: []string{"not a stream socket", "ListenStream="},
		},
		{
			name:    "not a socket",
			files:   func(t *testing.T) []*os.File { return []*os.File{regularFile(t, "http")} },
			wantErr: []string{"is not a socket"},
		},
		{
			name: "no http socket",
			files: func(t *testing.T) []*os.File {
				f, _ := socketFile(t, "mcpgate.socket", unix.AF_INET, unix.SOCK_STREAM, true)
				return []*os.File{f}
			},
			wantErr: []string{`none named "http"`, "FileDescriptorName=http"},
		},
		{
			name: "one bad among good",
			files: func(t *testing.T) []*os.File {
				good, _ := socketFile(t, "http", unix.AF_INET, unix.SOCK_STREAM, true)
				return []*os.File{good, connectedFile(t, "http")}
			},
			wantErr: []string{"Accept=no"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := tt.files(t)
			set, err := FromFiles(files, slog.New(&testutil.LogRecorder{}))
			if err == nil {
				set.Close()
				t.Fatal("FromFiles succeeded")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q, want it to say %q", err, want)
				}
			}
			for _, f := range files {
				if err := f.Close(); !errors.Is(err, os.ErrClosed) {
					t.Errorf("file %q left open by FromFiles (Close: %v)", f.Name(), err)
				}
			}
		})
	}
}

func TestFromFiles(t *testing.T) {
	tcp, _ := socketFile(t, "http", unix.AF_INET, unix.SOCK_STREAM, true)
	ux, uxPath := socketFile(t, "http", unix.AF_UNIX, unix.SOCK_STREAM, true)
	other, otherAddr := socketFile(t, "other", unix.AF_INET, unix.SOCK_STREAM, true)
	metrics, _ := socketFile(t, "metrics", unix.AF_INET, unix.SOCK_STREAM, true)
	h := &testutil.LogRecorder{}
	set, err := FromFiles([]*os.File{tcp, other, metrics, ux}, slog.New(h))
	if err != nil {
		t.Fatal(err)
	}
	if !set.Activated || len(set.Listeners) != 2 {
		t.Fatalf("got Activated=%v and %d listeners, want true and 2", set.Activated, len(set.Listeners))
	}
	for _, l := range set.Listeners {
		if l.Name != "http" {
			t.Errorf("Name = %q, want http", l.Name)
		}
		roundTrip(t, l)
	}
	if msgs := h.Messages(); len(msgs) != 1 || !strings.Contains(msgs[0], "not named http") {
		t.Errorf("log %q: want one message naming the other socket", msgs)
	}
	// The one named metrics is kept apart, for metrics_listen = "fd:metrics".
	if set.Metrics == nil || set.Metrics.Name != "metrics" {
		t.Errorf("Metrics = %v, want the socket named metrics", set.Metrics)
	} else {
		roundTrip(t, set.Metrics)
	}
	// The unknown socket is closed: nothing holds it any more.
	if c, err := net.DialTimeout("tcp", otherAddr, waitFor); err == nil {
		c.Close()
		t.Errorf("connected to the unknown socket %s; want it closed", otherAddr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect to the closed socket: %v, want connection refused", err)
	}
	if err := set.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !isSocket(t, uxPath) {
		t.Error("Close removed the socket file of an inherited unix socket")
	}
}
