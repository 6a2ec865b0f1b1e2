// Package journal writes structured entries to systemd-journald with its native protocol.
package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSocket is where systemd-journald listens for the native protocol.
const DefaultSocket = "/run/systemd/journal/socket"

// DefaultSendTimeout is how long Send waits for room on a full journal socket
// when WriterOptions.Timeout is zero.
const DefaultSendTimeout = 2 * time.Second

// maxFieldName is the longest field name journald accepts.
const maxFieldName = 64

// WriterOptions configure NewWriter.
type WriterOptions struct {
	// Socket is the journald native socket; "" means DefaultSocket.
	Socket string
	// Timeout bounds how long one Send waits while the journal socket's
	// queue is full (journald busy or stopped); 0 means DefaultSendTimeout,
	// negative means wait as long as it takes.
	Timeout time.Duration
}

// Writer sends entries to journald over its native unixgram socket. It is
// safe for concurrent use; sends are serialised.
type Writer struct {
	addr    *net.UnixAddr
	timeout time.Duration

	mu   sync.Mutex // serialises deadline+send pairs
	conn *net.UnixConn

	fdSends atomic.Uint64 // entries sent by the memfd path, for tests
}

// NewWriter returns a Writer for the socket in opts. It creates an unbound
// datagram socket and does not check that journald listens: Send reports
// that (wrapping ENOENT or ECONNREFUSED).
func NewWriter(opts WriterOptions) (*Writer, error) {
	path := opts.Socket
	if path == "" {
		path = DefaultSocket
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultSendTimeout
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("journal socket %s: %w", path, os.NewSyscallError("socket", err))
	}
	f := os.NewFile(uintptr(fd), "journal")
	c, err := net.FileConn(f)
	f.Close() // FileConn holds its own duplicate
	if err != nil {
		return nil, fmt.Errorf("journal socket %s: %w", path, err)
	}
	return &Writer{
		addr:    &net.UnixAddr{Name: path, Net: "unixgram"},
		timeout: timeout,
		conn:    c.(*net.UnixConn),
	}, nil
}

// Socket returns the journal socket path the Writer sends to.
func (w *Writer) Socket() string { return w.addr.Name }

// Close closes the Writer's socket. Sends after Close fail.
func (w *Writer) Close() error { return w.conn.Close() }

// Send writes e as one journal entry. Entries too large for a datagram
// (EMSGSIZE, ENOBUFS) are passed as a sealed memfd with SCM_RIGHTS, which
// journald accepts up to several hundred MiB. An empty entry is not sent.
// The error wraps the socket error: ENOENT or ECONNREFUSED when journald
// does not listen, os.ErrDeadlineExceeded when the socket stayed full for
// the Writer's timeout.
func (w *Writer) Send(e *Entry) error {
	if len(e.buf) == 0 {
		return nil
	}
	err := w.write(e.buf, nil)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EMSGSIZE) && !errors.Is(err, unix.ENOBUFS) {
		return fmt.Errorf("journal %s: %w", w.addr.Name, err)
	}
	if err := w.sendMemfd(e.buf); err != nil {
		return fmt.Errorf("journal %s: large entry (%d bytes): %w", w.addr.Name, len(e.buf), err)
	}
	return nil
}

func (w *Writer) write(b, oob []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timeout > 0 {
		if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
			return err
		}
	}
	_, _, err := w.conn.WriteMsgUnix(b, oob, w.addr)
	return err
}

// sendMemfd implements the protocol's file-descriptor path: the serialised
// entry goes into a memfd sealed against every change, and an empty datagram
// carries the descriptor.
func (w *Writer) sendMemfd(b []byte) error {
	fd, err := unix.MemfdCreate("mcpgate-journal", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:mcpgate-journal")
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return err
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return os.NewSyscallError("fcntl F_ADD_SEALS", err)
	}
	if err := w.write(nil, unix.UnixRights(fd)); err != nil {
		return err
	}
	w.fdSends.Add(1)
	return nil
}

// Entry is one journal entry being built, already serialised in the native
// protocol. The zero value is an empty entry; Reset makes it reusable.
type Entry struct {
	buf []byte
}

// Add appends the field name=value. The name is passed through
// SanitizeFieldName; a field whose name sanitises to "" is dropped. Values
// containing a newline use the protocol's length-prefixed binary form.
// A name may be added more than once; journald keeps every value.
func (e *Entry) Add(name, value string) {
	if name = SanitizeFieldName(name); name == "" {
		return
	}
	e.buf = append(e.buf, name...)
	e.buf = appendValue(e.buf, value)
}

// AddBytes is Add for a value held in a byte slice, which it copies.
func (e *Entry) AddBytes(name string, value []byte) {
	if name = SanitizeFieldName(name); name == "" {
		return
	}
	e.buf = append(e.buf, name...)
	e.buf = appendValue(e.buf, value)
}

// Len returns the entry's serialised size in bytes.
func (e *Entry) Len() int { return len(e.buf) }

// Reset empties the entry, keeping its buffer.
func (e *Entry) Reset() { e.buf = e.buf[:0] }

// appendValue appends "=value\n", or for a value with a newline
// "\n" + little-endian uint64 length + value + "\n", after a field name.
func appendValue[T string | []byte](b []byte, v T) []byte {
	if !hasNewline(v) {
		b = append(b, '=')
		b = append(b, v...)
		return append(b, '\n')
	}
	b = append(b, '\n')
	b = binary.LittleEndian.AppendUint64(b, uint64(len(v)))
	b = append(b, v...)
	return append(b, '\n')
}

func hasNewline[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if v[i] == '\n' {
			return true
		}
	}
	return false
}

// SanitizeFieldName turns name into a field name journald accepts: ASCII
// letters are upper-cased, every byte outside [A-Z0-9_] becomes '_', leading
// underscores (reserved for journald's trusted fields) are removed, a leading
// digit gets the prefix "X_", and the result is cut to 64 bytes. It returns
// "" when nothing is left. Valid names are returned unchanged without
// allocating.
func SanitizeFieldName(name string) string {
	if validFieldName(name) {
		return name
	}
	b := appendSanitizedName(make([]byte, 0, len(name)+2), name)
	return string(b)
}

func validFieldName(name string) bool {
	if name == "" || len(name) > maxFieldName || name[0] == '_' || isDigit(name[0]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'A' && c <= 'Z' || isDigit(c) || c == '_') {
			return false
		}
	}
	return true
}

// appendSanitizedName appends the sanitised form of name to b, which must
// not already hold the start of this field name.
func appendSanitizedName(b []byte, name string) []byte {
	start := len(b)
	for i := 0; i < len(name) && len(b)-start < maxFieldName; i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c >= 'A' && c <= 'Z', c == '_':
		case isDigit(c):
			if len(b) == start {
				b = append(b, 'X', '_')
			}
		default:
			c = '_'
		}
		if c == '_' && len(b) == start {
			continue
		}
		b = append(b, c)
	}
	return b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
