package journal

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"
	"time"
)

// awkward holds strings each quoted, or not, for its own reason by slog's
// TextHandler.
var awkward = []string{
	"", "plain", "team-a", "with space", "a=b", `q"uote`, `back\slash`, "\x7f", "\x01ctl", "tab\t",
	"new\nline", "日本語", "\u00a0nbsp", "\u2028sep", "\xffbad", "emoji😀", "zero\u200bwidth", "file:///a?b=c#d",
}

// WriteAudit on the text output writes, byte for byte, the line slog's
// TextHandler writes for the record: what reads the logs cannot tell the
// two paths apart.
func TestWriteAuditTextIsSlogText(t *testing.T) {
	zone := time.FixedZone("X", -(3*3600 + 30*60))
	times := []time.Time{
		time.Date(2026, 11, 28, 2, 30, 0, 0, time.UTC),
		time.Date(2026, 11, 28, 2, 30, 0, 999_999_999, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100_000, zone),
		time.Now(), // with a monotonic reading
	}
	for i, s := range awkward {
		a := &Audit{
			Time: times[i%len(times)], Client: s, Session: "0123456789abcdef", Backend: "b" + s,
			What: []string{"tool", "prompt", "uri"}[i%3], Name: s, Method: "tools/call",
			Duration: time.Duration(i) * 1234567, Outcome: []string{"ok", "error", "failed"}[i%3],
			Request: i * 100, Response: -i,
		}
		if i%2 == 1 {
			a.Session, a.RequestID = "", "r0badc0de-"+s // a stateless request's
		}
		switch i % 3 { // who it ran as upstream: none, the service, a subject
		case 1:
			a.Upstream = "service"
		case 2:
			a.Upstream, a.UpstreamSubject = "exchanged", s
		}
		var fast, slow bytes.Buffer
		WriteAudit(context.Background(), newTextHandler(&fast, slog.LevelInfo, nil), a)
		newTextHandler(&slow, slog.LevelInfo, nil).Handle(context.Background(), a.Record())
		if fast.String() != slow.String() {
			t.Errorf("%q:\n got %s\nwant %s", s, fast.String(), slow.String())
		}
	}
}

// A text handler with attributes of its own, or any other handler, gets
// the record, attributes and all; so does the text handler for an Audit
// without a Time, which slog writes without one.
func TestWriteAuditOtherHandlers(t *testing.T) {
	a := &Audit{Time: time.Now(), Client: "c", Session: "s", Backend: "b", What: "tool", Name: "t",
		Method: "tools/call", Outcome: "ok"}
	var with, json bytes.Buffer
	WriteAudit(context.Background(), newTextHandler(&with, slog.LevelInfo, nil).WithAttrs([]slog.Attr{slog.String("host", "h1")}), a)
	if !bytes.Contains(with.Bytes(), []byte(" host=h1 client=c ")) {
		t.Errorf("text handler with attributes wrote %q", with.String())
	}
	var zero bytes.Buffer
	WriteAudit(context.Background(), newTextHandler(&zero, slog.LevelInfo, nil), &Audit{Client: "c", Outcome: "ok"})
	if bytes.HasPrefix(zero.Bytes(), []byte("time=")) || !bytes.HasPrefix(zero.Bytes(), []byte("level=INFO ")) {
		t.Errorf("an Audit without a Time wrote %q", zero.String())
	}
	WriteAudit(context.Background(), slog.NewJSONHandler(&json, nil), a)
	if !bytes.Contains(json.Bytes(), []byte(`"`+MessageIDKey+`":"`+string(MessageAudit)+`"`)) {
		t.Errorf("JSON handler wrote %q", json.String())
	}
}

func testAudit() *Audit {
	return &Audit{Time: time.Now(), Client: "team-a", Session: "0123456789abcdef0123456789abcdef",
		Backend: "b000", What: "tool", Name: "echo", Method: "tools/call", Duration: 412 * time.Microsecond,
		Outcome: "ok", Request: 1061, Response: 1102}
}

// BenchmarkAuditText writes a call's audit entry as text, as WriteAudit
// does, to /dev/null.
func BenchmarkAuditText(b *testing.B) {
	benchmarkAudit(b, func(h slog.Handler, a *Audit) { WriteAudit(context.Background(), h, a) })
}

// BenchmarkAuditTextRecord writes the same entry through slog's
// TextHandler, as a.Record().
func BenchmarkAuditTextRecord(b *testing.B) {
	benchmarkAudit(b, func(h slog.Handler, a *Audit) { h.Handle(context.Background(), a.Record()) })
}

func benchmarkAudit(b *testing.B, write func(slog.Handler, *Audit)) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	h := newTextHandler(null, slog.LevelInfo, nil)
	b.ReportAllocs()
	for b.Loop() {
		a := testAudit()
		a.Time = time.Now()
		write(h, a)
	}
}
