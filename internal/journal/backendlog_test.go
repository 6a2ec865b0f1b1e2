package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

type piece struct {
	line    string
	partial bool
}

func collectLines(t *testing.T, r io.Reader) ([]piece, error) {
	t.Helper()
	var got []piece
	err := ReadLines(r, func(line []byte, partial bool) {
		got = append(got, piece{string(line), partial})
	})
	return got, err
}

func TestReadLines(t *testing.T) {
	max := strings.Repeat("m", MaxLineBytes)
	// A two-byte rune straddling the 64 KiB boundary moves the cut before it.
	utf := strings.Repeat("u", MaxLineBytes-1) + "é" + "tail"
	for _, tc := range []struct {
		name string
		in   string
		want []piece
	}{
		{"empty", "", nil},
		{"lines", "a\nb\n", []piece{{"a", false}, {"b", false}}},
		{"crlf and no final newline", "a\r\n\nb", []piece{{"a", false}, {"", false}, {"b", false}}},
		{"exactly max", max + "\nx\n", []piece{{max, false}, {"x", false}}},
		{"max plus one", max + "+\n", []piece{{max, true}, {"+", false}}},
		{"three pieces", max + max + "end\nok\n", []piece{{max, true}, {max, true}, {"end", false}, {"ok", false}}},
		{"utf-8 boundary", utf + "\n", []piece{{utf[:MaxLineBytes-1], true}, {"étail", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tc.in)},
				{"byte by byte", iotest.OneByteReader(strings.NewReader(tc.in))},
				{"data with EOF", iotest.DataErrReader(strings.NewReader(tc.in))},
			} {
				got, err := collectLines(t, r.r)
				if err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("%s: got %d pieces %.200v, want %d %.200v", r.name, len(got), got, len(tc.want), tc.want)
				}
			}
		})
	}
	boom := errors.New("boom")
	got, err := collectLines(t, io.MultiReader(strings.NewReader("a\nrest"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || fmt.Sprint(got) != fmt.Sprint([]piece{{"a", false}, {"rest", false}}) {
		t.Errorf("read error: got %v, %v", got, err)
	}
}

func TestTokenBucket(t *testing.T) {
	b := newTokenBucket(RateLimit{Burst: 2, Interval: time.Second})
	t0 := time.Now()
	if !b.take(t0) || !b.take(t0) || b.take(t0) {
		t.Fatal("a burst of 2 should pass 2 at once, then stop")
	}
	if d := b.untilToken(t0); d < 499*time.Millisecond || d > 501*time.Millisecond {
		t.Errorf("untilToken = %v, want 500ms", d)
	}
	if b.take(t0.Add(400 * time.Millisecond)) {
		t.Error("token before 500ms")
	}
	if !b.take(t0.Add(500 * time.Millisecond)) {
		t.Error("no token after 500ms")
	}
	if !b.take(t0.Add(time.Hour)) || !b.take(t0.Add(time.Hour)) || b.take(t0.Add(time.Hour)) {
		t.Error("a refilled bucket holds at most the burst")
	}
	u := newTokenBucket(RateLimit{})
	if !u.unlimited() || !u.take(time.Time{}) || u.untilToken(time.Time{}) != 0 {
		t.Error("Burst 0 should be unlimited")
	}
}

// TestBackendLogFields checks markers, priorities, PIDs and fields on the
// wire; it needs no root.
func TestBackendLogFields(t *testing.T) {
	fj := newFakeJournal(t)
	w, err := NewWriter(WriterOptions{Socket: fj.path})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bl := NewBackendLog(w, BackendLogOptions{Backend: "gh", Instance: "1", PID: 100})
	defer bl.Close()

	bl.Line([]byte("<3>head"), true)
	bl.SetPID(100) // the same pid, as a per-line sink sets it: the line goes on
	bl.Line([]byte("WARN middle"), true)
	bl.Line([]byte("tail"), false)
	bl.SetPID(200)
	bl.Line([]byte("next"), false)
	bl.Line([]byte("multi\nline"), false)

	for _, want := range []struct {
		msg, prio, pid string
	}{
		{"head" + ContinuedMarker, "3", "100"},
		{ContinuationMarker + "WARN middle" + ContinuedMarker, "3", "100"},
		{ContinuationMarker + "tail", "3", "100"},
		{"next", "6", "200"},
		{"multi\nline", "6", "200"},
	} {
		e := fj.next(t)
		f := e.fields
		if f["MESSAGE"] != want.msg || f["PRIORITY"] != want.prio || f["MCPGATE_BACKEND_PID"] != want.pid {
			t.Errorf("got %q prio %s pid %s; want %q prio %s pid %s", f["MESSAGE"], f["PRIORITY"], f["MCPGATE_BACKEND_PID"], want.msg, want.prio, want.pid)
		}
		if f["SYSLOG_IDENTIFIER"] != "mcpgate-gh" || f["MCPGATE_BACKEND"] != "gh" || f["MCPGATE_INSTANCE"] != "1" {
			t.Errorf("fields %v", f)
		}
		if len(e.names) != len(f) {
			t.Errorf("repeated fields: %v", e.names)
		}
	}
}

// TestBackendLogLongLineJournald sends a 300 KiB line through ReadLines and
// a BackendLog to a real journald: it arrives in marked pieces, nothing
// lost. The same line given to Line whole takes the memfd path.
func TestBackendLogLongLineJournald(t *testing.T) {
	j, w := realJournal(t)
	var sb strings.Builder
	sb.WriteString("ERROR ")
	for i := 0; sb.Len() < 300<<10; i++ {
		fmt.Fprintf(&sb, "%07d·", i) // "·" is two bytes: pieces must not split it
	}
	long := sb.String()

	bl := NewBackendLog(w, BackendLogOptions{Backend: "long", PID: 1})
	if err := ReadLines(strings.NewReader(long+"\nshort after\n"), bl.Line); err != nil {
		t.Fatal(err)
	}
	before := w.fdSends.Load()
	bl.Line([]byte(long), false)
	bl.Close()
	if w.fdSends.Load() == before {
		t.Error("a 300 KiB entry did not take the memfd path")
	}

	wantPieces := (len(long) + MaxLineBytes - 1) / MaxLineBytes
	got := j.AwaitMatch(t, wantPieces+2, journaldtest.Entry{"MCPGATE_BACKEND": "long"})
	if len(got) != wantPieces+2 {
		t.Fatalf("got %d entries, want %d pieces + 2", len(got), wantPieces)
	}
	var joined strings.Builder
	for i, e := range got[:wantPieces] {
		m := e["MESSAGE"]
		if i > 0 {
			if !strings.HasPrefix(m, ContinuationMarker) {
				t.Errorf("piece %d lacks %q", i, ContinuationMarker)
			}
			m = strings.TrimPrefix(m, ContinuationMarker)
		}
		if i < wantPieces-1 {
			if !strings.HasSuffix(m, ContinuedMarker) {
				t.Errorf("piece %d lacks %q", i, ContinuedMarker)
			}
			m = strings.TrimSuffix(m, ContinuedMarker)
		}
		if len(m) > MaxLineBytes {
			t.Errorf("piece %d holds %d bytes", i, len(m))
		}
		if e["PRIORITY"] != "3" {
			t.Errorf("piece %d: PRIORITY=%s, want the line's 3", i, e["PRIORITY"])
		}
		joined.WriteString(m)
	}
	if joined.String() != long {
		t.Errorf("pieces joined: %d bytes, want the %d bytes of the line", joined.Len(), len(long))
	}
	if m := got[wantPieces]["MESSAGE"]; m != "short after" {
		t.Errorf("line after the long one: %q", m)
	}
	if m := got[wantPieces+1]["MESSAGE"]; m != long {
		t.Errorf("whole long line: %d bytes, want %d", len(m), len(long))
	}
}

// spam calls Line n times and returns the longest call and the total time.
func spam(bl *BackendLog, n int) (worst, total time.Duration) {
	var buf []byte
	start := time.Now()
	for i := range n {
		buf = fmt.Appendf(buf[:0], "spam line %d", i)
		t0 := time.Now()
		bl.Line(buf, false)
		if d := time.Since(t0); d > worst {
			worst = d
		}
	}
	return worst, time.Since(start)
}

// accounted waits until the entries of backend plus the lines their
// summaries report add up to n, and returns lines and summaries.
func accounted(t *testing.T, j *journaldtest.Journald, backend string, n int) (lines, summaries []journaldtest.Entry) {
	t.Helper()
	j.Await(t, fmt.Sprintf("%d lines of %s written or reported suppressed", n, backend), func(es []journaldtest.Entry) bool {
		lines, summaries = nil, nil
		sum := 0
		for _, e := range journaldtest.Select(es, journaldtest.Entry{"MCPGATE_BACKEND": backend}) {
			if e["MESSAGE_ID"] == string(MessageSuppressed) {
				summaries = append(summaries, e)
				k, _ := strconv.Atoi(e["MCPGATE_SUPPRESSED"])
				sum += k
			} else {
				lines = append(lines, e)
			}
		}
		return len(lines)+sum == n
	})
	return lines, summaries
}

const maxLineCall = 100 * time.Millisecond // far below any journal stall

// TestBackendLogSpamJournald floods a rate-limited BackendLog: Line never
// blocks, the journal gets about the burst, and summaries account for every
// other line — the first as soon as the limit lifts, without Close.
func TestBackendLogSpamJournald(t *testing.T) {
	j, w := realJournal(t)
	const n, burst = 20000, 100
	bl := NewBackendLog(w, BackendLogOptions{Backend: "spam", RateLimit: RateLimit{Burst: burst, Interval: time.Second}})
	worst, total := spam(bl, n)
	if worst > maxLineCall {
		t.Errorf("slowest Line call took %v", worst)
	}
	first := j.AwaitMatch(t, 1, journaldtest.Entry{"MCPGATE_BACKEND": "spam", "MESSAGE_ID": string(MessageSuppressed)})[0]
	if !strings.Contains(first["MESSAGE"], " lines suppressed (rate limit 100 per 1s: ") || first["PRIORITY"] != "4" || first["SYSLOG_IDENTIFIER"] != "mcpgate-spam" {
		t.Errorf("summary entry: %v", first)
	}
	bl.Close()

	lines, summaries := accounted(t, j, "spam", n)
	if limit := burst + int(total.Seconds()*burst) + 1; len(lines) > limit {
		t.Errorf("%d lines written in %v, limit allows %d", len(lines), total, limit)
	}
	if len(lines) < burst {
		t.Errorf("only %d lines written, want at least the burst %d", len(lines), burst)
	}
	if got := bl.Suppressed(); got != uint64(n-len(lines)) {
		t.Errorf("Suppressed() = %d, want %d", got, n-len(lines))
	}
	if lines[0]["MESSAGE"] != "spam line 0" {
		t.Errorf("first line %q", lines[0]["MESSAGE"])
	}
	t.Logf("%d Line calls in %v (slowest %v): %d lines written, %d summaries", n, total, worst, len(lines), len(summaries))
}

// TestBackendLogJournalGone: with no journal at all, Line and Close return
// at once and every line is counted.
func TestBackendLogJournalGone(t *testing.T) {
	w, err := NewWriter(WriterOptions{Socket: filepath.Join(t.TempDir(), "gone")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var logged syncBuffer
	bl := NewBackendLog(w, BackendLogOptions{
		Backend:  "gone",
		ErrorLog: slog.New(slog.NewTextHandler(&logged, nil)),
	})
	const n = 10000
	worst, _ := spam(bl, n)
	if worst > maxLineCall {
		t.Errorf("slowest Line call took %v", worst)
	}
	start := time.Now()
	bl.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	if got := bl.Suppressed(); got != n {
		t.Errorf("Suppressed() = %d, want %d", got, n)
	}
	if c := strings.Count(logged.String(), "journal write failed"); c != 1 {
		t.Errorf("journal failure logged %d times, want once:\n%s", c, logged.String())
	}
	bl.Line([]byte("after close"), false) // a no-op, not a panic
}

// TestBackendLogJournalBlockedJournald stops journald so its socket fills:
// Line calls still return at once, and when journald runs again one
// summary accounts for what could not be written.
func TestBackendLogJournalBlockedJournald(t *testing.T) {
	j := journaldtest.Start(t)
	w, err := NewWriter(WriterOptions{Socket: j.Socket(), Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	failed := make(chan struct{}, 1)
	bl := NewBackendLog(w, BackendLogOptions{
		Backend:   "blocked",
		QueueSize: 64,
		ErrorLog:  slog.New(signalHandler{failed}),
	})

	j.Suspend(t)
	const n = 5000
	worst, total := spam(bl, n)
	if worst > maxLineCall {
		t.Errorf("slowest Line call took %v while journald was stopped", worst)
	}
	select { // the writer goroutine gave up on the stopped journald
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("no journal write failure reported while journald was stopped")
	}
	worst2, _ := spam(bl, n)
	if worst2 > maxLineCall {
		t.Errorf("slowest Line call took %v after journal writes failed", worst2)
	}
	j.Resume(t)
	j.AwaitMatch(t, 1, journaldtest.Entry{"MCPGATE_BACKEND": "blocked", "MESSAGE_ID": string(MessageSuppressed)})
	bl.Close()
	lines, summaries := accounted(t, j, "blocked", 2*n)
	if bl.Suppressed() == 0 || len(lines) == 2*n {
		t.Error("no line suppressed while journald was stopped")
	}
	t.Logf("2×%d Line calls in %v (slowest %v) against a stopped journald: %d lines written, %d summaries: %s",
		n, total, worst, len(lines), len(summaries), summaries[0]["MESSAGE"])
}

func BenchmarkBackendLogLine(b *testing.B) {
	w, err := NewWriter(WriterOptions{Socket: filepath.Join(b.TempDir(), "gone")})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	bl := NewBackendLog(w, BackendLogOptions{Backend: "bench", RateLimit: RateLimit{Burst: 1000, Interval: 10 * time.Second}})
	defer bl.Close()
	line := []byte("[INFO] 2024-01-01T00:00:00Z request served in 12ms path=/mcp status=200")
	b.ReportAllocs()
	for b.Loop() {
		bl.Line(line, false)
	}
}

// signalHandler is an slog.Handler that signals each record on a channel.
type signalHandler struct{ c chan<- struct{} }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h signalHandler) WithGroup(string) slog.Handler            { return h }
func (h signalHandler) Handle(context.Context, slog.Record) error {
	select {
	case h.c <- struct{}{}:
	default:
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
