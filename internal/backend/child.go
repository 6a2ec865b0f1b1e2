package backend

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// child is a running stdio server, whoever its parent is: the daemon
// (process, runner = "process") or systemd (unitChild, runner = "unit").
// The connection owns its standard streams either way.
type child interface {
	// id returns the server's process id.
	id() int
	// streams returns our ends of its standard streams.
	streams() *stdio
	// wait blocks until it has ended and nothing of it is left running.
	wait() ExitInfo
	// signal asks the whole child to end: sig to its process group, or a
	// stop of its unit, whatever sig is.
	signal(sig unix.Signal) error
	// kill ends it at once, without waiting.
	kill() error
	// unitName returns its systemd unit, or "".
	unitName() string
	// usage reads what its cgroup uses now.
	usage() Usage
}

// Usage is what a backend's server uses now, from its cgroup; each is
// math.MaxUint64 where unknown (no server runs, it has no cgroup of its
// own, or nothing accounts for it), as systemd shows it.
type Usage struct {
	MemoryCurrent uint64 // bytes
	TasksCurrent  uint64
	CPUUsageNSec  uint64 // since the server started
}

// unknownUsage is a Usage with nothing known.
var unknownUsage = Usage{math.MaxUint64, math.MaxUint64, math.MaxUint64}

// Usage reads what the backend's running server uses now.
func (b *Backend) Usage() Usage {
	b.mu.Lock()
	conn := b.conn
	b.mu.Unlock()
	if conn == nil || conn.proc == nil {
		return unknownUsage
	}
	return conn.proc.usage()
}

// stdio are our ends of a child's standard streams.
type stdio struct {
	stdin  *os.File // write end of the child's stdin
	stdout *os.File // read end of the child's stdout
	stderr *os.File // read end of the child's stderr
}

// newStdio creates the three pipes: ours, and theirs for the child
// (stdin, stdout, stderr), which the caller closes once handed over.
func newStdio() (ours stdio, theirs [3]*os.File, err error) {
	var ends [3][2]*os.File // read, write
	for i := range ends {
		if ends[i][0], ends[i][1], err = os.Pipe(); err != nil {
			for _, e := range ends[:i] {
				closeFiles(e[:])
			}
			return stdio{}, theirs, fmt.Errorf("create pipe: %w", err)
		}
	}
	ours = stdio{stdin: ends[0][1], stdout: ends[1][0], stderr: ends[2][0]}
	theirs = [3]*os.File{ends[0][0], ends[1][1], ends[2][1]}
	return ours, theirs, nil
}

func (s *stdio) close() { closeFiles([]*os.File{s.stdin, s.stdout, s.stderr}) }

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
