package journal

import (
	"context"
	"encoding"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"
)

// DefaultIdentifier is the SYSLOG_IDENTIFIER of the daemon's own entries.
const DefaultIdentifier = "mcpgated"

// FieldPrefix starts the journal field name of every slog attribute.
const FieldPrefix = "MCPGATE_"

// MessageIDKey is the attribute key whose value Handler writes as the
// entry's MESSAGE_ID instead of as an MCPGATE_ field; see MessageID.Attr.
const MessageIDKey = "message_id"

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// Level is the minimum level written; nil means slog.LevelInfo.
	Level slog.Leveler
	// Identifier is the SYSLOG_IDENTIFIER; "" means DefaultIdentifier.
	Identifier string
	// TraceIDs, if set, returns the trace and span id of the span a
	// record's context carries (see telemetry.IDs): an entry logged on a
	// traced call's path gets them as TRACE_ID= and SPAN_ID=.
	TraceIDs TraceIDs
}

// TraceIDs returns the trace and span id, in hex, of the span ctx
// carries; ok is false when it carries none.
type TraceIDs func(ctx context.Context) (traceID, spanID string, ok bool)

// The fields of an entry logged on a traced call's path: the
// OpenTelemetry trace and span it belongs to, so that
// journalctl TRACE_ID=… finds a trace's entries.
const (
	FieldTraceID = "TRACE_ID"
	FieldSpanID  = "SPAN_ID"
)

// Handler is an slog.Handler writing each record as one native journal
// entry:
//
//   - MESSAGE is the record's message, PRIORITY its level (LevelPriority),
//     SYSLOG_IDENTIFIER the configured identifier, and SYSLOG_TIMESTAMP the
//     record's time (RFC 3339, nanoseconds) unless it is zero.
//   - CODE_FILE, CODE_LINE and CODE_FUNC name the logging call for records
//     at slog.LevelWarn and above that carry a PC.
//   - Every attribute becomes a field: FieldPrefix, then the groups and the
//     key joined with "_", upper-cased, other bytes than [A-Z0-9_] turned
//     into "_", cut at 64 bytes: "backend" → MCPGATE_BACKEND, group "http"
//     with "status" → MCPGATE_HTTP_STATUS. Values are written as
//     slog.TextHandler would show them unquoted (errors by Error, times in
//     RFC 3339, TextMarshalers by MarshalText); newlines are kept.
//   - The attribute MessageIDKey, at any group depth, becomes MESSAGE_ID;
//     a record's own overrides one from WithAttrs.
//
// Empty attributes and empty groups are left out, as slog asks.
type Handler struct {
	w         *Writer
	level     slog.Leveler
	ident     string
	attrs     []byte // fields serialised by WithAttrs
	groups    string // open groups, each followed by "_"
	messageID string
	traceIDs  TraceIDs
}

// NewHandler returns a Handler writing to w; opts may be nil.
func NewHandler(w *Writer, opts *HandlerOptions) *Handler {
	h := &Handler{w: w, level: slog.LevelInfo, ident: DefaultIdentifier}
	if opts != nil {
		if opts.Level != nil {
			h.level = opts.Level
		}
		if opts.Identifier != "" {
			h.ident = opts.Identifier
		}
		h.traceIDs = opts.TraceIDs
	}
	return h
}

// Enabled reports whether level is at least the configured minimum.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.level.Level()
}

// Handle writes r to the journal and returns the Writer's error.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	e := Entry{buf: make([]byte, 0, 256+len(h.attrs)+len(r.Message))}
	e.Add("MESSAGE", r.Message)
	e.Add("PRIORITY", strconv.Itoa(LevelPriority(r.Level)))
	e.Add("SYSLOG_IDENTIFIER", h.ident)
	if !r.Time.IsZero() {
		e.Add("SYSLOG_TIMESTAMP", r.Time.Format(time.RFC3339Nano))
	}
	if r.Level >= slog.LevelWarn && r.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		if f.File != "" {
			e.Add("CODE_FILE", f.File)
			e.Add("CODE_LINE", strconv.Itoa(f.Line))
		}
		if f.Function != "" {
			e.Add("CODE_FUNC", f.Function)
		}
	}
	e.buf = append(e.buf, h.attrs...)
	id := h.messageID
	r.Attrs(func(a slog.Attr) bool {
		e.buf = appendAttr(e.buf, h.groups, a, &id)
		return true
	})
	if id != "" {
		e.Add("MESSAGE_ID", id)
	}
	if h.traceIDs != nil {
		if trace, span, ok := h.traceIDs(ctx); ok {
			e.Add(FieldTraceID, trace)
			e.Add(FieldSpanID, span)
		}
	}
	return h.w.Send(&e)
}

// WithAttrs returns a Handler whose entries also carry attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	h2 := *h
	h2.attrs = append([]byte(nil), h.attrs...)
	for _, a := range attrs {
		h2.attrs = appendAttr(h2.attrs, h.groups, a, &h2.messageID)
	}
	return &h2
}

// WithGroup returns a Handler that puts name and "_" before the field names
// of the attributes that follow.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.groups = h.groups + name + "_"
	return &h2
}

// appendAttr serialises a as a field (or several, for a group) under the
// open groups; MessageIDKey goes to *id instead.
func appendAttr(b []byte, groups string, a slog.Attr, id *string) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		attrs := a.Value.Group()
		if a.Key != "" {
			groups += a.Key + "_"
		}
		for _, ga := range attrs {
			b = appendAttr(b, groups, ga, id)
		}
		return b
	}
	if a.Key == "" {
		return b
	}
	if a.Key == MessageIDKey {
		*id = valueString(a.Value)
		return b
	}
	start := len(b)
	b = append(b, FieldPrefix...)
	b = appendNameTail(b, start, groups)
	b = appendNameTail(b, start, a.Key)
	return appendValue(b, valueString(a.Value))
}

// appendNameTail appends s to the field name that begins at b[start:],
// upper-cased and with bytes outside [A-Z0-9_] as "_", up to 64 bytes.
func appendNameTail(b []byte, start int, s string) []byte {
	for i := 0; i < len(s) && len(b)-start < maxFieldName; i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c >= 'A' && c <= 'Z', isDigit(c), c == '_':
		default:
			c = '_'
		}
		b = append(b, c)
	}
	return b
}

func valueString(v slog.Value) string {
	switch v.Kind() {
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return x.Error()
		case encoding.TextMarshaler:
			t, err := x.MarshalText()
			if err != nil {
				return "!ERROR:" + err.Error()
			}
			return string(t)
		case []byte:
			return string(x)
		default:
			return fmt.Sprintf("%+v", x)
		}
	default:
		return v.String()
	}
}
