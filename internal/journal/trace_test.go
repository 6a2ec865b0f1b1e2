package journal

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// traced is a context that names a span, as telemetry.IDs reads it.
type tracedKey struct{}

func fakeIDs(ctx context.Context) (string, string, bool) {
	if ctx.Value(tracedKey{}) == nil {
		return "", "", false
	}
	return "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true
}

// An entry logged with a traced call's context carries the trace and the
// span: TRACE_ID= and SPAN_ID= in the journal (the real journald),
// trace_id= and span_id= on stderr, audit entries too; one without a
// span, or without TraceIDs, carries neither.
func TestTraceFields(t *testing.T) {
	traced := context.WithValue(context.Background(), tracedKey{}, true)
	j, w := realJournal(t)
	log := slog.New(NewHandler(w, &HandlerOptions{TraceIDs: fakeIDs}))
	log.InfoContext(traced, "traced")
	log.Info("untraced")
	WriteAudit(traced, log.Handler(), &Audit{Time: time.Now(), Client: "c", Method: "tools/call", What: "tool", Name: "t", Outcome: "ok"})
	got := j.AwaitMatch(t, 3, journaldtest.Entry{"SYSLOG_IDENTIFIER": DefaultIdentifier})
	for i, want := range []bool{true, false, true} {
		if has := got[i][FieldTraceID] == "4bf92f3577b34da6a3ce929d0e0e4736" && got[i][FieldSpanID] == "00f067aa0ba902b7"; has != want {
			t.Errorf("entry %q: TRACE_ID=%q SPAN_ID=%q, want them: %v", got[i]["MESSAGE"], got[i][FieldTraceID], got[i][FieldSpanID], want)
		}
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, err := NewOutput(OutputOptions{Target: TargetStderr, Stderr: f, TraceIDs: fakeIDs})
	if err != nil {
		t.Fatal(err)
	}
	text := slog.New(o.Handler)
	text.InfoContext(traced, "traced")
	text.Info("untraced")
	WriteAudit(traced, o.Handler, &Audit{Time: time.Now(), Client: "c", Method: "tools/call", What: "tool", Name: "t", Outcome: "ok"})
	o.Close()
	b, _ := os.ReadFile(f.Name())
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines:\n%s", b)
	}
	for i, want := range []bool{true, false, true} {
		if has := strings.HasSuffix(lines[i], " trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7"); has != want {
			t.Errorf("line %q: ends with trace_id= and span_id=: %v, want %v", lines[i], has, want)
		}
	}
}
