package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// slogtestMap turns journal fields back into the nested map slogtest
// expects. Field names lose case and group boundaries; slogtest's groups
// are upper-case letters ("G", "H") and its keys lower-case, so every part
// of an MCPGATE_ name but the last is a group, and the last is lowered.
func slogtestMap(fields map[string]string) map[string]any {
	m := map[string]any{}
	for k, v := range fields {
		switch k {
		case "MESSAGE":
			m[slog.MessageKey] = v
		case "PRIORITY":
			m[slog.LevelKey] = v
		case "SYSLOG_TIMESTAMP":
			m[slog.TimeKey] = v
		case "CODE_FILE":
			m[slog.SourceKey] = v
		}
		name, ok := strings.CutPrefix(k, FieldPrefix)
		if !ok {
			continue
		}
		parts := strings.Split(name, "_")
		cur := m
		for _, g := range parts[:len(parts)-1] {
			sub, ok := cur[g].(map[string]any)
			if !ok {
				sub = map[string]any{}
				cur[g] = sub
			}
			cur = sub
		}
		cur[strings.ToLower(parts[len(parts)-1])] = v
	}
	return m
}

func TestSlogtestWire(t *testing.T) {
	fj := newFakeJournal(t)
	w, err := NewWriter(WriterOptions{Socket: fj.path})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	slogtest.Run(t,
		func(*testing.T) slog.Handler { return NewHandler(w, nil) },
		func(t *testing.T) map[string]any { return slogtestMap(fj.next(t).fields) })
}

// TestSlogtestJournald runs slogtest against a real journald: each case
// gets its own SYSLOG_IDENTIFIER to find its entry.
func TestSlogtestJournald(t *testing.T) {
	j, w := realJournal(t)
	n := 0
	slogtest.Run(t,
		func(*testing.T) slog.Handler {
			n++
			return NewHandler(w, &HandlerOptions{Identifier: fmt.Sprintf("slogtest-%d", n)})
		},
		func(t *testing.T) map[string]any {
			e := j.AwaitMatch(t, 1, journaldtest.Entry{"SYSLOG_IDENTIFIER": fmt.Sprintf("slogtest-%d", n)})[0]
			return slogtestMap(e)
		})
}

type textValue struct{}

func (textValue) MarshalText() ([]byte, error) { return []byte("as text"), nil }

// TestHandlerJournald checks the daemon's own entries in a real journald.
func TestHandlerJournald(t *testing.T) {
	j, w := realJournal(t)
	log := slog.New(NewHandler(w, &HandlerOptions{Level: slog.LevelDebug}))
	start := time.Now()

	log.Info("backend spawned", "backend", "github", "backend_pid", 1234, MessageSpawn.Attr())
	_, _, callLine, _ := runtime.Caller(0)
	log.With("session", "s-1").WithGroup("http").Warn("slow request",
		"status", 200, "duration", 1500*time.Millisecond, "error", errors.New("multi\nline error"),
		"text", textValue{}, slog.Group("peer", "addr", "127.0.0.1"), "when", start,
		"odd key!", "x", MessageReady.Attr())
	log.With(MessageReload.Attr()).Error("reload failed", MessageReloadFailed.Attr())
	log.Debug("details")
	log.Log(context.Background(), LevelCritical, "critical")

	got := j.AwaitMatch(t, 5, journaldtest.Entry{"SYSLOG_IDENTIFIER": DefaultIdentifier})
	spawn, warn, reload, debug, crit := got[0], got[1], got[2], got[3], got[4]

	for k, v := range map[string]string{
		"MESSAGE": "backend spawned", "PRIORITY": "6", "MESSAGE_ID": string(MessageSpawn),
		"MCPGATE_BACKEND": "github", "MCPGATE_BACKEND_PID": "1234",
	} {
		if spawn[k] != v {
			t.Errorf("spawn entry: %s=%q, want %q", k, spawn[k], v)
		}
	}
	for _, k := range []string{"CODE_FILE", "CODE_LINE", "CODE_FUNC", "MCPGATE_MESSAGE_ID"} {
		if _, ok := spawn[k]; ok {
			t.Errorf("info entry has %s", k)
		}
	}
	if ts, err := time.Parse(time.RFC3339Nano, spawn["SYSLOG_TIMESTAMP"]); err != nil || ts.Before(start.Add(-time.Second)) {
		t.Errorf("SYSLOG_TIMESTAMP=%q: %v", spawn["SYSLOG_TIMESTAMP"], err)
	}

	for k, v := range map[string]string{
		"MESSAGE": "slow request", "PRIORITY": "4", "MESSAGE_ID": string(MessageReady),
		"MCPGATE_SESSION": "s-1", "MCPGATE_HTTP_STATUS": "200", "MCPGATE_HTTP_DURATION": "1.5s",
		"MCPGATE_HTTP_ERROR": "multi\nline error", "MCPGATE_HTTP_TEXT": "as text",
		"MCPGATE_HTTP_PEER_ADDR": "127.0.0.1", "MCPGATE_HTTP_WHEN": start.Format(time.RFC3339Nano),
		"MCPGATE_HTTP_ODD_KEY_": "x",
		"CODE_FUNC":             "github.com/mcpgate/mcpgate/internal/journal.TestHandlerJournald",
		"CODE_LINE":             fmt.Sprint(callLine + 1),
	} {
		if warn[k] != v {
			t.Errorf("warning entry: %s=%q, want %q", k, warn[k], v)
		}
	}
	if filepath.Base(warn["CODE_FILE"]) != "handler_test.go" {
		t.Errorf("CODE_FILE=%q", warn["CODE_FILE"])
	}
	if reload["MESSAGE_ID"] != string(MessageReloadFailed) || reload["PRIORITY"] != "3" || reload["CODE_FUNC"] == "" {
		t.Errorf("error entry: the record's message_id should win and CODE_* be set: %v", journaldtest.Dump([]journaldtest.Entry{reload}))
	}
	if debug["MESSAGE"] != "details" || debug["PRIORITY"] != "7" {
		t.Errorf("debug entry: %v", debug)
	}
	if crit["PRIORITY"] != "2" {
		t.Errorf("critical entry: %v", crit)
	}
}

// TestLogBackendExitJournald logs exits the way a backend reports them.
func TestLogBackendExitJournald(t *testing.T) {
	j, w := realJournal(t)
	log := slog.New(NewHandler(w, nil))

	pid, pid2 := 4242, 4343
	LogBackendExit(context.Background(), log, BackendExit{
		Backend: "github", PID: pid, ExitCode: "exited", ExitStatus: 3, StderrTail: []string{"connecting…", "fatal: token expired"},
	})
	LogBackendExit(context.Background(), log, BackendExit{Backend: "fs", Instance: "2", PID: pid2, ExitCode: "killed", ExitStatus: 9, Signal: "SIGKILL"})
	LogBackendExit(context.Background(), log, BackendExit{Backend: "lost", PID: 9})
	LogBackendExit(context.Background(), log, BackendExit{Backend: "big", PID: 10, Unit: "mcpgate-backend@big.service", ExitCode: "killed", ExitStatus: 9, Signal: "SIGKILL", OOM: true})

	oom := j.AwaitMatch(t, 1, journaldtest.Entry{"MESSAGE_ID": string(MessageOOM)})[0]
	for k, v := range map[string]string{
		"MESSAGE":           `backend "big" (pid 10) was killed by the kernel's OOM killer: it reached its memory_max`,
		"MCPGATE_REASON":    "oom",
		"MCPGATE_UNIT":      "mcpgate-backend@big.service",
		"MCPGATE_EXIT_CODE": "killed",
	} {
		if oom[k] != v {
			t.Errorf("OOM entry: %s=%q, want %q", k, oom[k], v)
		}
	}
	got := j.AwaitMatch(t, 3, journaldtest.Entry{"MESSAGE_ID": string(MessageExit)})
	exited, killed, unknown := got[0], got[1], got[2]
	for k, v := range map[string]string{
		"MESSAGE":             fmt.Sprintf("backend \"github\" (pid %d) exited with status 3; last stderr lines:\nconnecting…\nfatal: token expired", pid),
		"PRIORITY":            "4",
		"MCPGATE_BACKEND":     "github",
		"MCPGATE_BACKEND_PID": fmt.Sprint(pid),
		"MCPGATE_EXIT_CODE":   "exited",
		"MCPGATE_EXIT_STATUS": "3",
		"MCPGATE_STDERR_TAIL": "connecting…\nfatal: token expired",
		"CODE_FUNC":           "github.com/mcpgate/mcpgate/internal/journal.TestLogBackendExitJournald",
		"SYSLOG_IDENTIFIER":   "mcpgated",
	} {
		if exited[k] != v {
			t.Errorf("exit entry: %s=%q, want %q", k, exited[k], v)
		}
	}
	if _, ok := exited["MCPGATE_SIGNAL"]; ok {
		t.Error("exit entry has MCPGATE_SIGNAL")
	}
	for k, v := range map[string]string{
		"MESSAGE":             fmt.Sprintf("backend \"fs\" (pid %d) killed by signal SIGKILL", pid2),
		"MCPGATE_INSTANCE":    "2",
		"MCPGATE_EXIT_CODE":   "killed",
		"MCPGATE_EXIT_STATUS": "9",
		"MCPGATE_SIGNAL":      "SIGKILL",
	} {
		if killed[k] != v {
			t.Errorf("killed entry: %s=%q, want %q", k, killed[k], v)
		}
	}
	if unknown["MESSAGE"] != `backend "lost" (pid 9) ended (status unknown)` {
		t.Errorf("unknown exit: %q", unknown["MESSAGE"])
	}
}

func TestMessageIDs(t *testing.T) {
	ids := []MessageID{MessageSpawn, MessageBackendReady, MessageExit, MessageRestart, MessageGiveUp,
		MessageStartFailed, MessageReady, MessageReload, MessageReloadFailed, MessageStopping, MessageSuppressed,
		MessageOOM, MessageMemoryHigh, MessageReexec, MessageAdopted, MessageAdoptFailed, MessageHandoffRefused}
	hex := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[MessageID]bool{}
	for _, id := range ids {
		if !hex.MatchString(string(id)) || seen[id] {
			t.Errorf("message id %q: not 32 hex digits or repeated", id)
		}
		seen[id] = true
		if a := id.Attr(); a.Key != MessageIDKey || a.Value.String() != id.String() {
			t.Errorf("%s.Attr() = %v", id, a)
		}
	}
}

// TestNewOutput checks the choice of target, with a real journald stream
// standing in for a service's stderr.
func TestNewOutput(t *testing.T) {
	j, _ := realJournal(t)
	stream, journalStream := j.Stream(t, "output-test")
	plain, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	absent := filepath.Join(t.TempDir(), "absent")

	for _, tc := range []struct {
		name    string
		opts    OutputOptions
		journal bool
		err     bool
	}{
		{"auto under the journal", OutputOptions{JournalStream: journalStream, Stderr: stream, Socket: j.Socket()}, true, false},
		{"auto, stream of another file", OutputOptions{Target: TargetAuto, JournalStream: journalStream, Stderr: plain, Socket: j.Socket()}, false, false},
		{"auto, no JOURNAL_STREAM", OutputOptions{Stderr: stream, Socket: j.Socket()}, false, false},
		{"auto, malformed JOURNAL_STREAM", OutputOptions{JournalStream: "x", Stderr: stream, Socket: j.Socket()}, false, false},
		{"auto, socket gone", OutputOptions{JournalStream: journalStream, Stderr: stream, Socket: absent}, false, false},
		{"journal", OutputOptions{Target: TargetJournal, Stderr: plain, Socket: j.Socket()}, true, false},
		{"journal, socket gone", OutputOptions{Target: TargetJournal, Stderr: plain, Socket: absent}, false, true},
		{"stderr", OutputOptions{Target: TargetStderr, JournalStream: journalStream, Stderr: stream, Socket: j.Socket()}, false, false},
		{"bad target", OutputOptions{Target: "syslog"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := NewOutput(tc.opts)
			if (err != nil) != tc.err {
				t.Fatalf("NewOutput: %v, want error %v", err, tc.err)
			}
			if err != nil {
				if tc.opts.Target == TargetJournal && !strings.Contains(err.Error(), `log_target = "stderr"`) {
					t.Errorf("error %q does not say what to do", err)
				}
				return
			}
			defer o.Close()
			if _, isJournal := o.Handler.(*Handler); isJournal != tc.journal || (o.Writer != nil) != tc.journal {
				t.Errorf("journal handler = %v, writer = %v; want journal %v", isJournal, o.Writer, tc.journal)
			}
		})
	}

	o, err := NewOutput(OutputOptions{JournalStream: journalStream, Stderr: stream, Socket: j.Socket()})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	slog.New(o.Handler).Info("native under the journal", "backend", "x")
	e := j.AwaitMatch(t, 1, journaldtest.Entry{"MESSAGE": "native under the journal"})[0]
	if e["_TRANSPORT"] != "journal" || e["MCPGATE_BACKEND"] != "x" {
		t.Errorf("entry %v", e)
	}
}

// textOutput returns the handler of a text Output on a file, at level
// debug, and a function that closes the Output and reads what it wrote.
func textOutput(t *testing.T) (slog.Handler, func() string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	o, err := NewOutput(OutputOptions{Target: TargetStderr, Stderr: f, Level: slog.LevelDebug})
	if err != nil {
		t.Fatal(err)
	}
	return o.Handler, func() string {
		o.Close()
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// The standard levels and ours take two handlers: both keep the attributes
// and groups a logger was given, and write the same line but for the
// level's name.
func TestTextOutputAttrsAtEveryLevel(t *testing.T) {
	h, written := textOutput(t)
	log := slog.New(h).With("backend", "b").WithGroup("call")
	log.Info("m", "tool", "t")
	log.Log(context.Background(), LevelNotice, "m", "tool", "t")
	out := written()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines:\n%s", out)
	}
	for i, level := range []string{"INFO", "NOTICE"} {
		_, rest, _ := strings.Cut(lines[i], " ") // after time=
		if want := "level=" + level + " msg=m backend=b call.tool=t"; rest != want {
			t.Errorf("line %d: %q, want %q", i, rest, want)
		}
	}
}

func TestTextOutputLevelNames(t *testing.T) {
	h, written := textOutput(t)
	log := slog.New(h)
	for _, l := range []slog.Level{slog.LevelDebug, LevelNotice, LevelCritical, LevelAlert, LevelEmergency} {
		log.Log(context.Background(), l, "m")
	}
	out := written()
	for _, name := range []string{"level=DEBUG", "level=NOTICE", "level=CRITICAL", "level=ALERT", "level=EMERGENCY"} {
		if !strings.Contains(out, name) {
			t.Errorf("text output lacks %s:\n%s", name, out)
		}
	}
}
