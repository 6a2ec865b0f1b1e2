package backend

import (
	"bufio"
	"errors"
	"io"
	"sync"
)

// MaxStderrLine is the longest piece of a stderr line handed over at once.
// Longer lines arrive in pieces, all but the last marked partial.
const MaxStderrLine = 64 << 10

// LineSink receives every line a child writes to stderr. Line must not
// block: a child must never stall on a full stderr pipe.
type LineSink interface {
	Line(pid int, line []byte, partial bool)
}

// ring keeps the most recent lines of a backend's stderr, across restarts.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

const (
	ringLines   = 100
	ringLineMax = 1024 // bytes kept of one line; the journal gets all of it
)

func newRing() *ring { return &ring{lines: make([]string, ringLines)} }

func (r *ring) add(line []byte) {
	if len(line) > ringLineMax {
		line = append(line[:ringLineMax:ringLineMax], "…"...)
	}
	r.mu.Lock()
	r.lines[r.next] = string(line)
	r.next = (r.next + 1) % len(r.lines)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
}

// tail returns up to n of the most recent lines, oldest first.
func (r *ring) tail(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := r.next
	if r.full {
		count = len(r.lines)
	}
	n = min(n, count)
	out := make([]string, 0, n)
	for i := r.next - n; i < r.next; i++ {
		out = append(out, r.lines[(i+len(r.lines))%len(r.lines)])
	}
	return out
}

// readStderr drains the child's stderr until EOF, into the ring and the sink.
// It never stops reading early, so the child can always write.
func readStderr(r io.Reader, pid int, buf *ring, sink LineSink) {
	br := bufio.NewReaderSize(r, MaxStderrLine)
	partialPending := false
	for {
		chunk, err := br.ReadSlice('\n')
		partial := errors.Is(err, bufio.ErrBufferFull)
		line := chunk
		if !partial {
			line = trimEOL(line)
		}
		if len(line) > 0 || partial || partialPending {
			if !partialPending {
				buf.add(line)
			}
			if sink != nil {
				sink.Line(pid, line, partial)
			}
		}
		partialPending = partial
		if err != nil && !partial {
			return
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
