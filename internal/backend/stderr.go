package backend

import (
	"io"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// MaxStderrLine is the longest piece of a stderr line handed over at once.
// Longer lines arrive in pieces, all but the last marked partial.
const MaxStderrLine = journal.MaxLineBytes

// LineSink receives every line a child writes to stderr. Line must not
// block: a child must never stall on a full stderr pipe.
type LineSink interface {
	Line(pid int, line []byte, partial bool)
}

// ring keeps the most recent lines of a backend's stderr, across restarts.
type ring struct {
	mu    sync.Mutex
	lines []ringLine
	next  int
	full  bool
}

type ringLine struct {
	pid  int // the child that wrote it
	text string
}

const (
	ringLines   = 100
	ringLineMax = 1024 // bytes kept of one line; the journal gets all of it
)

func newRing() *ring { return &ring{lines: make([]ringLine, ringLines)} }

func (r *ring) add(pid int, line []byte) {
	if len(line) > ringLineMax {
		cut := ringLineMax // back to a character boundary, so the tail stays UTF-8
		for i := 1; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(line[cut]); i++ {
			cut--
		}
		line = append(line[:cut:cut], "…"...)
	}
	r.mu.Lock()
	r.lines[r.next] = ringLine{pid, string(line)}
	r.next = (r.next + 1) % len(r.lines)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
}

// tail returns up to n of the most recent lines, oldest first, of the
// child pid, or of any child for pid 0.
func (r *ring) tail(n, pid int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := r.next
	if r.full {
		count = len(r.lines)
	}
	var out []string
	for i := 1; i <= count && len(out) < n; i++ {
		l := r.lines[(r.next-i+len(r.lines))%len(r.lines)]
		if pid == 0 || l.pid == pid {
			out = append(out, l.text)
		}
	}
	slices.Reverse(out)
	return out
}

// readStderr drains the child's stderr until EOF, into the ring and the sink.
// It never stops reading early, so the child can always write. Lines longer
// than MaxStderrLine come in pieces cut between UTF-8 characters, so every
// piece is readable text; empty lines are skipped.
func readStderr(r io.Reader, pid int, buf *ring, sink LineSink) {
	continuing := false // the previous piece was partial
	_ = journal.ReadLines(r, func(line []byte, partial bool) {
		if len(line) > 0 || partial || continuing {
			if !continuing {
				buf.add(pid, line)
			}
			if sink != nil {
				sink.Line(pid, line, partial)
			}
		}
		continuing = partial
	}) // a read error means the pipe is gone, as EOF does
}
