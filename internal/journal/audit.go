package journal

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// An Audit is the entry journaled when a call ends: who called what, how
// long it took, how it ended and how big it was, never the arguments or
// the result.
type Audit struct {
	Time     time.Time
	Client   string
	Identity string // who authenticated as the client (access.Caller.Identity); "" without auth
	Session  string
	// RequestID names a stateless (2026-07-28) request, which has no
	// session: the same identifier its other entries carry; "" for a
	// session's request, which has no such attribute.
	RequestID string
	Backend   string
	What      string // "tool", "prompt" or "uri"
	Name      string // the tool's or prompt's name, or the URI
	Method    string
	Duration  time.Duration
	Outcome   string // "ok", "error" (the backend's) or "failed" (no answer)
	Request   int    // bytes of the request's params
	Response  int    // bytes of the answer
	// Upstream is who the call ran as at the backend's server:
	// "exchanged" (a token exchanged for the caller's), "service" (the
	// backend's own OAuth token), "" for a backend without OAuth toward
	// its server (no attribute then). UpstreamSubject is the exchanged
	// token's subject. Never a token.
	Upstream        string
	UpstreamSubject string
}

// Record returns a as an slog record at LevelInfo.
func (a *Audit) Record() slog.Record {
	r := slog.NewRecord(a.Time, slog.LevelInfo, a.message(), 0)
	r.AddAttrs(
		slog.String("client", a.Client),
		slog.String("identity", a.Identity),
		slog.String("session", a.Session))
	if a.RequestID != "" {
		r.AddAttrs(slog.String("request", a.RequestID))
	}
	r.AddAttrs(
		slog.String("backend", a.Backend),
		slog.String(a.What, a.Name),
		slog.String("method", a.Method),
		slog.Int64("duration_usec", a.Duration.Microseconds()),
		slog.String("outcome", a.Outcome),
		slog.Int("request_bytes", a.Request),
		slog.Int("response_bytes", a.Response))
	if a.Upstream != "" {
		r.AddAttrs(slog.String("upstream", a.Upstream))
	}
	if a.UpstreamSubject != "" {
		r.AddAttrs(slog.String("upstream_subject", a.UpstreamSubject))
	}
	r.AddAttrs(MessageAudit.Attr())
	return r
}

func (a *Audit) message() string {
	return "audit: " + a.Client + " " + a.Method + " " + a.Name + ": " + a.Outcome
}

// WriteAudit journals a through h. The text handler of NewOutput writes it
// without building a record, for about half the cost; any other handler,
// or an Audit without a Time, which slog writes without one, gets
// a.Record().
// ctx names the call's span, if it is traced (see HandlerOptions.TraceIDs).
func WriteAudit(ctx context.Context, h slog.Handler, a *Audit) {
	if t, ok := h.(textHandler); ok && t.w != nil && !a.Time.IsZero() {
		t.writeAudit(ctx, a)
		return
	}
	h.Handle(ctx, a.Record())
}

var auditBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeAudit writes the line slog's TextHandler writes for a.Record(),
// and the trace of ctx's span as Handle would add it.
func (h textHandler) writeAudit(ctx context.Context, a *Audit) {
	p := auditBufs.Get().(*[]byte)
	b := append((*p)[:0], "time="...)
	b = appendRFC3339Millis(b, a.Time)
	b = append(b, " level=INFO msg="...)
	b = appendTextValue(b, a.message())
	b = appendTextAttr(b, "client", a.Client)
	b = appendTextAttr(b, "identity", a.Identity)
	b = appendTextAttr(b, "session", a.Session)
	if a.RequestID != "" {
		b = appendTextAttr(b, "request", a.RequestID)
	}
	b = appendTextAttr(b, "backend", a.Backend)
	b = appendTextAttr(b, a.What, a.Name)
	b = appendTextAttr(b, "method", a.Method)
	b = strconv.AppendInt(append(b, " duration_usec="...), a.Duration.Microseconds(), 10)
	b = appendTextAttr(b, "outcome", a.Outcome)
	b = strconv.AppendInt(append(b, " request_bytes="...), int64(a.Request), 10)
	b = strconv.AppendInt(append(b, " response_bytes="...), int64(a.Response), 10)
	if a.Upstream != "" {
		b = appendTextAttr(b, "upstream", a.Upstream)
	}
	if a.UpstreamSubject != "" {
		b = appendTextAttr(b, "upstream_subject", a.UpstreamSubject)
	}
	b = appendTextAttr(b, MessageIDKey, string(MessageAudit))
	if h.ids != nil {
		if trace, span, ok := h.ids(ctx); ok {
			b = appendTextAttr(appendTextAttr(b, traceIDKey, trace), spanIDKey, span)
		}
	}
	b = append(b, '\n')
	h.w.Write(b)
	if cap(b) <= maxPooledAudit { // a long URI's buffer is not kept
		*p = b
		auditBufs.Put(p)
	}
}

const maxPooledAudit = 4 << 10

func appendTextAttr(b []byte, key, value string) []byte {
	b = appendTextValue(append(b, ' '), key)
	return appendTextValue(append(b, '='), value)
}

// appendTextValue appends s as slog's TextHandler does: quoted when empty
// or when it holds a space, '=', '"', an ASCII control character other
// than DEL, invalid UTF-8, or a space or unprintable rune beyond ASCII.
func appendTextValue(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == ' ' || c == '=' || c == '"' || c < 0x20 {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// appendRFC3339Millis appends t as slog's TextHandler does: RFC 3339 with
// exactly three digits of the second's fraction, truncated.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefix = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Round(0).Truncate(time.Millisecond).Add(time.Millisecond / 10) // four digits, never trimmed
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefix], b[n+prefix+1:]...)
}
