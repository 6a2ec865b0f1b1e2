// Package listeners opens the daemon's listening sockets, passed in by systemd socket activation or bound from the config's listen addresses.
package listeners

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"
)

// FDName is the name (FileDescriptorName= in mcpgate.socket, LISTEN_FDNAMES)
// of the activated sockets that serve the MCP endpoint.
const FDName = "http"

// MetricsFDName is the name of the activated socket that serves Prometheus
// metrics when [gateway] metrics_listen = "fd:metrics".
const MetricsFDName = "metrics"

// UnixPrefix starts a listen address that is a unix socket path.
const UnixPrefix = "unix:"

// SocketMode is the mode of the unix socket files Bind creates: owner and
// group may connect.
const SocketMode fs.FileMode = 0o660

// Listener is one listening socket the daemon serves from.
type Listener struct {
	net.Listener
	// Name says where the socket came from: the fd name for an activated
	// socket ("http"), else the listen address as configured
	// ("127.0.0.1:7431", "unix:/run/mcpgate/mcpgate.sock").
	Name string
}

// Set is the daemon's listening sockets.
type Set struct {
	// Listeners are the sockets to serve the MCP endpoint on, in the order
	// systemd passed them or the listen addresses were given.
	Listeners []*Listener
	// Activated reports that systemd passed the sockets in; the config's
	// listen addresses were not used.
	Activated bool
	// Metrics is the activated socket named "metrics", or nil.
	Metrics *Listener
}

// Open returns the daemon's listening sockets. If systemd passed sockets
// (LISTEN_FDS for this process), it takes them as FromFiles does and ignores
// listen; otherwise it binds listen as Bind does. It reads and unsets the
// LISTEN_* variables, so call it once. The error says what to change.
func Open(listen []string, log *slog.Logger) (*Set, error) {
	if files := activation.Files(true); len(files) > 0 {
		return FromFiles(files, log)
	}
	return Bind(listen)
}

// FromFiles takes the sockets systemd passed in (activation.Files) and closes
// every file given, having kept what it needs. Listening stream sockets (TCP or
// unix) named "http" become Listeners, one named "metrics" becomes Metrics;
// a socket of any other name is logged
// (slog.Default if log is nil) and closed. It returns an error, and keeps
// nothing, when a socket is already connected (mcpgate.socket has Accept=yes),
// when an "http" file is not a listening TCP or unix stream socket, or when
// no "http" socket was passed at all.
func FromFiles(files []*os.File, log *slog.Logger) (*Set, error) {
	if log == nil {
		log = slog.Default()
	}
	set := &Set{Activated: true}
	var errs []error
	for _, f := range files {
		l, err := fromFile(f, log)
		f.Close() // a Listener holds its own duplicate
		switch {
		case err != nil:
			errs = append(errs, err)
		case l != nil && l.Name == MetricsFDName && set.Metrics == nil:
			set.Metrics = l
		case l != nil && l.Name == MetricsFDName:
			l.Close()
			errs = append(errs, errors.New("socket activation passed more than one socket named "+MetricsFDName+"; keep one"))
		case l != nil:
			set.Listeners = append(set.Listeners, l)
		}
	}
	if len(errs) == 0 && len(set.Listeners) == 0 {
		errs = append(errs, fmt.Errorf("socket activation passed %d socket(s) but none named %q: set FileDescriptorName=%s in mcpgate.socket", len(files), FDName, FDName))
	}
	if len(errs) > 0 {
		set.Close()
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// fromFile returns the Listener for an activated file, or nil for a file
// that is not ours and has been logged.
func fromFile(f *os.File, log *slog.Logger) (*Listener, error) {
	info, err := inspect(f)
	if err != nil {
		return nil, err
	}
	// Checked before the name: with Accept=yes systemd names every
	// connection "connection", whatever FileDescriptorName= says.
	if info.err == nil && info.typ == unix.SOCK_STREAM && !info.listening {
		return nil, fmt.Errorf("socket-activated fd %d (%q) is a connected socket, not a listening one: mcpgate.socket has Accept=yes; set Accept=no in mcpgate.socket", info.fd, f.Name())
	}
	if f.Name() != FDName && f.Name() != MetricsFDName {
		log.Warn("closing a socket-activated file not named "+FDName+"; give the sockets mcpgated should serve FileDescriptorName="+FDName,
			"fd", info.fd, "name", f.Name())
		return nil, nil
	}
	switch {
	case info.err != nil:
		return nil, fmt.Errorf("socket-activated fd %d (%q) is not a socket: %w", info.fd, f.Name(), info.err)
	case info.typ != unix.SOCK_STREAM:
		return nil, fmt.Errorf("socket-activated fd %d (%q) is not a stream socket: use ListenStream= in mcpgate.socket", info.fd, f.Name())
	case info.domain != unix.AF_INET && info.domain != unix.AF_INET6 && info.domain != unix.AF_UNIX:
		return nil, fmt.Errorf("socket-activated fd %d (%q) is neither a TCP nor a unix socket (address family %d)", info.fd, f.Name(), info.domain)
	}
	nl, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("socket-activated fd %d (%q): %w", info.fd, f.Name(), err)
	}
	if ul, ok := nl.(*net.UnixListener); ok {
		// The socket file belongs to mcpgate.socket; net does not unlink
		// inherited sockets, and this says so.
		ul.SetUnlinkOnClose(false)
	}
	return &Listener{Listener: nl, Name: f.Name()}, nil
}

// sockInfo is what getsockopt says about an inherited file.
type sockInfo struct {
	fd        int
	err       error // from getsockopt SO_TYPE: ENOTSOCK for a non-socket
	typ       int
	domain    int
	listening bool
}

// inspect queries f without f.Fd, which would switch it to blocking mode.
func inspect(f *os.File) (sockInfo, error) {
	var info sockInfo
	rc, err := f.SyscallConn()
	if err != nil {
		return info, fmt.Errorf("socket-activated file %q: %w", f.Name(), err)
	}
	cerr := rc.Control(func(fd uintptr) {
		s := int(fd)
		info.fd = s
		if info.typ, info.err = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_TYPE); info.err != nil {
			return
		}
		var acc int
		if acc, info.err = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); info.err != nil {
			return
		}
		info.listening = acc != 0
		info.domain, info.err = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_DOMAIN)
	})
	if cerr != nil {
		return info, fmt.Errorf("socket-activated file %q: %w", f.Name(), cerr)
	}
	return info, nil
}

// Bind listens on each address in listen: "host:port" for TCP, or
// "unix:/absolute/path" for a unix socket. For a unix socket it creates the
// parent directory if missing (mode 0755 less the umask), replaces an existing socket file
// only when connecting to it is refused (a stale one), and makes the new file
// mode 0660; closing the Listener removes the file. It returns an error naming
// the address, and keeps nothing, if any address cannot be bound, including
// "another instance is listening on …" for a live unix socket.
func Bind(listen []string) (*Set, error) {
	if len(listen) == 0 {
		return nil, errors.New("no listen addresses: set listen in the [gateway] section of the config")
	}
	set := &Set{}
	for _, addr := range listen {
		l, err := bind(addr)
		if err != nil {
			set.Close()
			return nil, err
		}
		set.Listeners = append(set.Listeners, &Listener{Listener: l, Name: addr})
	}
	return set, nil
}

// BindOne listens on one address as Bind does.
func BindOne(addr string) (*Listener, error) {
	l, err := bind(addr)
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: l, Name: addr}, nil
}

func bind(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, UnixPrefix); ok {
		return bindUnix(addr, path)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("listen address %q: want host:port or %s/absolute/path: %w", addr, UnixPrefix, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	return l, nil
}

func bindUnix(addr, path string) (net.Listener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("listen address %q: the socket path must be absolute", addr)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("listen address %q: create the socket's directory: %w", addr, err)
	}
	if err := removeStale(addr, path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	// net unlinks the file on Close since it created it. Until the chmod the
	// file has the umask's mode; under the usual umasks (022, 027) nobody
	// else has write permission, which connecting needs, meanwhile.
	if err := os.Chmod(path, SocketMode); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	return l, nil
}

// removeStale removes the socket file at path if nothing listens on it.
func removeStale(addr, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("listen address %q: %s exists and is not a socket; remove it or change listen", addr, path)
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		conn.Close()
		return fmt.Errorf("listen address %q: another instance is listening on %s (mcpgated, or mcpgate.socket): stop it or change listen", addr, path)
	case errors.Is(err, syscall.ECONNREFUSED):
		// Stale: left behind by a process that did not close it.
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		// EAGAIN (a live listener with a full backlog), EACCES, …: not
		// provably stale, so not ours to remove.
		return fmt.Errorf("listen address %q: cannot tell whether %s is in use: %w", addr, path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("listen address %q: remove stale socket: %w", addr, err)
	}
	return nil
}

// Close closes every listener, removing the unix socket files Bind created
// (never those systemd passed in). Listeners already closed, for instance by
// http.Server.Shutdown, are skipped. It returns the other errors, joined.
func (s *Set) Close() error {
	if s == nil {
		return nil
	}
	var errs []error
	all := s.Listeners
	if s.Metrics != nil {
		all = append(all[:len(all):len(all)], s.Metrics)
	}
	for _, l := range all {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("close listener %s: %w", l.Name, err))
		}
	}
	return errors.Join(errs...)
}
