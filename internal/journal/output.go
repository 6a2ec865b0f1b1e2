package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Log targets: the values of the config key log_target.
const (
	TargetAuto    = "auto"
	TargetJournal = "journal"
	TargetStderr  = "stderr"
)

// OutputOptions configure NewOutput.
type OutputOptions struct {
	// Target is TargetAuto (also ""), TargetJournal or TargetStderr.
	Target string
	// Level is the minimum level logged; nil means slog.LevelInfo.
	Level slog.Leveler
	// Socket is the journal's native socket; "" means DefaultSocket.
	Socket string
	// JournalStream is the value JOURNAL_STREAM had when the daemon
	// started ("" when unset).
	JournalStream string
	// Stderr is the daemon's standard error; nil means os.Stderr.
	Stderr *os.File
	// TraceIDs, if set, gives entries on a traced call's path the trace
	// and span they belong to: TRACE_ID= and SPAN_ID= in the journal,
	// trace_id= and span_id= in text.
	TraceIDs TraceIDs
}

// Output is where the daemon's own logs go, as NewOutput chose.
type Output struct {
	// Handler is a Handler on Writer, or an slog.TextHandler on stderr.
	Handler slog.Handler
	// Writer is the journal Writer, nil when logging text to stderr. It
	// can be shared with NewBackendLog.
	Writer *Writer

	text *batchWriter // stderr's, when logging text
}

// NewOutput chooses where logs go:
//
//   - TargetJournal: native journal entries (Handler) on opts.Socket. It
//     fails when nothing listens there.
//   - TargetAuto or "": native journal entries when stderr is connected to
//     the journal, that is JournalStream names stderr's device and inode
//     (see IsJournalStream) and the socket accepts connections; otherwise
//     text on stderr.
//   - TargetStderr: text on stderr (slog.TextHandler; the extra levels are
//     named NOTICE, CRITICAL, ALERT and EMERGENCY).
//
// Any other target is an error.
func NewOutput(opts OutputOptions) (*Output, error) {
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	text := func() *Output {
		b := newBatchWriter(stderr)
		return &Output{Handler: newTextHandler(b, opts.Level, opts.TraceIDs), text: b}
	}
	native := func() (*Output, error) {
		w, err := openJournal(opts.Socket)
		if err != nil {
			return nil, err
		}
		return &Output{Handler: NewHandler(w, &HandlerOptions{Level: opts.Level, TraceIDs: opts.TraceIDs}), Writer: w}, nil
	}
	switch opts.Target {
	case TargetStderr:
		return text(), nil
	case TargetJournal:
		o, err := native()
		if err != nil {
			return nil, fmt.Errorf("log_target %q: %w; start systemd-journald or set log_target = %q", TargetJournal, err, TargetStderr)
		}
		return o, nil
	case TargetAuto, "":
		if ok, _ := IsJournalStream(opts.JournalStream, stderr); !ok {
			return text(), nil
		}
		if o, err := native(); err == nil {
			return o, nil
		}
		return text(), nil // stderr still reaches the journal, as a stream
	default:
		return nil, fmt.Errorf("log_target %q: want %q, %q or %q", opts.Target, TargetAuto, TargetJournal, TargetStderr)
	}
}

// Close closes the journal Writer, if any, or writes the text records
// still queued for stderr; text records logged afterwards are written
// directly.
func (o *Output) Close() error {
	if o.text != nil {
		return o.text.Close()
	}
	if o.Writer == nil {
		return nil
	}
	return o.Writer.Close()
}

// openJournal checks that journald listens on socket and returns a Writer
// for it.
func openJournal(socket string) (*Writer, error) {
	if socket == "" {
		socket = DefaultSocket
	}
	c, err := net.Dial("unixgram", socket)
	if err != nil {
		return nil, fmt.Errorf("journal socket %s: %w", socket, err)
	}
	c.Close()
	return NewWriter(WriterOptions{Socket: socket})
}

// IsJournalStream reports whether f is connected to the journal's stream
// transport: journalStream, the value of JOURNAL_STREAM that systemd sets,
// is "<device>:<inode>" of f. It returns (false, nil) when journalStream is
// "", (false, err) when it is malformed or f cannot be examined.
func IsJournalStream(journalStream string, f *os.File) (bool, error) {
	if journalStream == "" {
		return false, nil
	}
	devStr, inoStr, ok := strings.Cut(journalStream, ":")
	dev, err1 := strconv.ParseUint(devStr, 10, 64)
	ino, err2 := strconv.ParseUint(inoStr, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return false, fmt.Errorf("JOURNAL_STREAM=%q: want <device>:<inode>", journalStream)
	}
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("JOURNAL_STREAM: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, errors.New("JOURNAL_STREAM: no device and inode for " + f.Name())
	}
	return uint64(st.Dev) == dev && st.Ino == ino, nil
}

// newTextHandler is slog's TextHandler on w, with the extra levels named.
// Once a ReplaceAttr is set, slog passes every attribute of every record
// through it, a quarter of the cost of an audit entry; records of the
// standard levels, which need no renaming, go to a handler without one.
// Both write each record with one Write, so their lines never interleave.
func newTextHandler(w io.Writer, level slog.Leveler, ids TraceIDs) slog.Handler {
	return textHandler{
		w:     w,
		ids:   ids,
		plain: slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}),
		named: slog.NewTextHandler(w, &slog.HandlerOptions{
			Level: level,
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) == 0 && a.Key == slog.LevelKey {
					if l, ok := a.Value.Any().(slog.Level); ok {
						if name, ok := levelName(l); ok {
							a.Value = slog.StringValue(name)
						}
					}
				}
				return a
			},
		}),
	}
}

// textHandler sends a record to named if its level has a name of ours,
// else to plain. w is what both write to, for WriteAudit; nil once the
// handler has attributes or groups of its own, which WriteAudit would
// leave out.
type textHandler struct {
	w            io.Writer
	plain, named slog.Handler
	ids          TraceIDs // see OutputOptions.TraceIDs
}

func (h textHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.plain.Enabled(ctx, l)
}

func (h textHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.ids != nil {
		if trace, span, ok := h.ids(ctx); ok {
			r = r.Clone()
			r.AddAttrs(slog.String(traceIDKey, trace), slog.String(spanIDKey, span))
		}
	}
	if _, ok := levelName(r.Level); ok {
		return h.named.Handle(ctx, r)
	}
	return h.plain.Handle(ctx, r)
}

func (h textHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return textHandler{plain: h.plain.WithAttrs(attrs), named: h.named.WithAttrs(attrs), ids: h.ids}
}

func (h textHandler) WithGroup(name string) slog.Handler {
	return textHandler{plain: h.plain.WithGroup(name), named: h.named.WithGroup(name), ids: h.ids}
}

// The text attributes of FieldTraceID and FieldSpanID.
const (
	traceIDKey = "trace_id"
	spanIDKey  = "span_id"
)
