// Package handoff is what one mcpgated hands the next across an in-place re-exec: one versioned, authenticated record.
package handoff

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// FormatVersion is the version of the record this binary writes and reads.
// A record of another version is refused: a newer mcpgated's record is not
// read by an older one (a downgrade starts clean), and a change of the
// record's meaning bumps it.
const FormatVersion = 1

// MaxRecordBytes bounds a record: what a re-exec carries is a few catalogs
// and descriptors' numbers, never more than this.
const MaxRecordBytes = 32 << 20

// EnvFD is the environment variable that names, to the re-executed
// mcpgated, the descriptor its record is in.
const EnvFD = "MCPGATE_HANDOFF_FD"

// magic starts every record, before its format version.
var magic = [8]byte{'m', 'c', 'p', 'g', 'h', 'o', 'f', 'f'}

// header is magic, the format version and the payload's length; the MAC
// (HMAC-SHA256 of header and payload) follows the payload.
const header = len(magic) + 4 + 4

// Errors a record is refused with; each says what it was.
var (
	// ErrFormat is a record of another format version, or not a record.
	ErrFormat = errors.New("not a handoff record of this mcpgated's format")
	// ErrTampered is a record whose MAC does not match: changed after it
	// was written, or written with another key.
	ErrTampered = errors.New("handoff record failed authentication (changed, or written with another key)")
	// ErrForeignBoot is a record written before the last boot.
	ErrForeignBoot = errors.New("handoff record is from another boot")
	// ErrForeignProcess is a record written by another process.
	ErrForeignProcess = errors.New("handoff record was written by another process")
	// ErrTooLarge is a record above MaxRecordBytes.
	ErrTooLarge = fmt.Errorf("handoff record larger than %d bytes", MaxRecordBytes)
)

// Record is the state one mcpgated hands the next.
type Record struct {
	Format  int    `json:"format"`
	BootID  string `json:"bootId"`
	PID     int    `json:"pid"`     // the daemon's, which a re-exec keeps
	Version string `json:"version"` // the mcpgated that wrote it, for the journal
	// Listeners are the daemon's listening sockets, in order.
	Listeners []Listener `json:"listeners"`
	// Backends are the running servers the next process adopts.
	Backends []Backend `json:"backends"`
	// Sessions are the client sessions the next process answers, in the
	// gateway's shape (gateway.SessionState).
	Sessions json.RawMessage `json:"sessions,omitempty"`
}

// Listener is one listening socket carried across.
type Listener struct {
	FD   int    `json:"fd"`
	Name string `json:"name"` // its FileDescriptorName= ("http", "metrics")
}

// Backend is one running stdio server carried across: its process, our ends
// of its pipes, and what its handshake said.
type Backend struct {
	Name string `json:"name"`
	// Config is a digest of the backend's configuration: a backend whose
	// configuration changed is not adopted but restarted.
	Config string `json:"config"`
	PID    int    `json:"pid"`
	Stdin  int    `json:"stdin"`
	Stdout int    `json:"stdout"`
	Stderr int    `json:"stderr"`
	// Unread is what was read from its stdout and not yet handled: the
	// next process reads it first, so that no message is lost.
	Unread []byte `json:"unread,omitempty"`
	// NextID is the last request id used toward it; the next process goes
	// on from there, so that a late answer never meets a new request.
	NextID int64 `json:"nextId"`
	// Abandoned are the ids of requests still unanswered: their answers
	// are dropped.
	Abandoned []int64 `json:"abandoned,omitempty"`
	Modern    bool    `json:"modern,omitempty"`
	// Unit and Invocation name the systemd unit the server runs in
	// (runner = "unit") and the run, by its InvocationID; "" and nil for
	// a child of the daemon.
	Unit       string `json:"unit,omitempty"`
	Invocation []byte `json:"invocation,omitempty"`
	// Handshake is its handshake's result and lists, in the shape of the
	// catalog cache.
	Handshake json.RawMessage `json:"handshake"`
}

// Seal returns rec as bytes authenticated with key.
func Seal(rec *Record, key []byte) ([]byte, error) {
	rec.Format = FormatVersion
	payload, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if header+len(payload)+sha256.Size > MaxRecordBytes {
		return nil, ErrTooLarge
	}
	out := make([]byte, header, header+len(payload)+sha256.Size)
	copy(out, magic[:])
	binary.BigEndian.PutUint32(out[8:], FormatVersion)
	binary.BigEndian.PutUint32(out[12:], uint32(len(payload)))
	out = append(out, payload...)
	return append(out, mac(key, out)...), nil
}

// Open authenticates data with key and returns its record, refusing one of
// another format, one that fails authentication, one from a boot other
// than bootID and one written by a process other than pid. The error wraps
// the Err* that applies.
func Open(data, key []byte, bootID string, pid int) (*Record, error) {
	if len(data) > MaxRecordBytes {
		return nil, ErrTooLarge
	}
	if len(data) < header+sha256.Size || !bytes.Equal(data[:8], magic[:]) {
		return nil, ErrFormat
	}
	if v := binary.BigEndian.Uint32(data[8:]); v != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this mcpgated reads %d", ErrFormat, v, FormatVersion)
	}
	n := int(binary.BigEndian.Uint32(data[12:]))
	if n != len(data)-header-sha256.Size {
		return nil, fmt.Errorf("%w: length %d does not match", ErrFormat, n)
	}
	body, sum := data[:header+n], data[header+n:]
	if !hmac.Equal(sum, mac(key, body)) {
		return nil, ErrTampered
	}
	var rec Record
	if err := json.Unmarshal(body[header:], &rec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if rec.Format != FormatVersion {
		return nil, fmt.Errorf("%w: format %d inside", ErrFormat, rec.Format)
	}
	if rec.BootID != bootID {
		return nil, fmt.Errorf("%w (boot %s, now %s)", ErrForeignBoot, rec.BootID, bootID)
	}
	if rec.PID != pid {
		return nil, fmt.Errorf("%w (pid %d, this is %d)", ErrForeignProcess, rec.PID, pid)
	}
	return &rec, nil
}

func mac(key, data []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(data)
	return h.Sum(nil)
}

// BootID returns the kernel's id of this boot.
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read the boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
