package itest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// These tests run mcpgated against a private systemd-journald
// (journaldtest, which needs root and skips the test otherwise) and read
// back what it stored with journalctl.

type entry = journaldtest.Entry

// journalConfig is the configuration of testutil.Config with log_target
// set to target and the daemon logging at info. FAKE in backends is the
// fake server; gatewayKeys are more lines for [gateway].
func journalConfig(t *testing.T, target, gatewayKeys, backends string) (toml, url string) {
	t.Helper()
	bins := testutil.Build(t)
	toml, url = testutil.ConfigWith(t, strings.ReplaceAll(backends, "FAKE", bins.Fake), testutil.ConfigOptions{Gateway: gatewayKeys})
	for _, r := range [][2]string{
		{`log_target = "stderr"`, fmt.Sprintf("log_target = %q", target)},
		{`log_level = "debug"`, `log_level = "info"`},
	} {
		if !strings.Contains(toml, r[0]) {
			t.Fatalf("testutil.Config no longer writes %s:\n%s", r[0], toml)
		}
		toml = strings.Replace(toml, r[0], r[1], 1)
	}
	return toml, url
}

// journalGateway starts mcpgated with log_target = "journal" and
// --journal-socket pointing at j.
func journalGateway(t *testing.T, j *journaldtest.Journald, gatewayKeys, backends string) *testutil.Daemon {
	t.Helper()
	toml, url := journalConfig(t, journal.TargetJournal, gatewayKeys, backends)
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Args: []string{"--journal-socket", j.Socket()}})
}

// childLog matches the entries made of what backend said: its stderr
// lines, its MCP log messages and its suppression summaries.
func childLog(backend string) entry { return entry{"SYSLOG_IDENTIFIER": "mcpgate-" + backend} }

// daemonLog matches the daemon's own entries with the given MESSAGE_ID.
func daemonLog(id journal.MessageID, more entry) entry {
	m := entry{"SYSLOG_IDENTIFIER": journal.DefaultIdentifier, "MESSAGE_ID": id.String()}
	for k, v := range more {
		m[k] = v
	}
	return m
}

// checkFields reports every field of want that e lacks or has another
// value for.
func checkFields(t *testing.T, what string, e, want entry) {
	t.Helper()
	for k, v := range want {
		if got, ok := e[k]; !ok || got != v {
			t.Errorf("%s: %s = %q, want %q; entry: %s", what, k, got, v, journaldtest.Dump([]entry{e}))
		}
	}
}

// withoutSummaries drops the suppression summaries from es.
func withoutSummaries(es []entry) []entry {
	var out []entry
	for _, e := range es {
		if e["MESSAGE_ID"] != journal.MessageSuppressed.String() {
			out = append(out, e)
		}
	}
	return out
}

func suppressedCount(t *testing.T, e entry) int {
	t.Helper()
	n, err := strconv.Atoi(e["MCPGATE_SUPPRESSED"])
	if err != nil {
		t.Fatalf("summary without a count: %s", journaldtest.Dump([]entry{e}))
	}
	return n
}

// Every stderr line of a child is one entry, with the priority its prefix
// says and the backend's fields; one write of many lines gives one entry
// per line, in order.
func TestJournalChildStderrLines(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, "", "[backends.fmt]\ncommand = \"FAKE\"\n")
	cs := d.Connect(t, nil)
	child := testutil.FakeProcess(t, cs, "fmt__pid").PID

	cases := []struct{ line, message, priority string }{
		{"<3>sd-daemon prefix", "sd-daemon prefix", "3"},
		{"<5>notice by sd-daemon prefix", "notice by sd-daemon prefix", "5"},
		{"<11>syslog facility and priority", "syslog facility and priority", "3"},
		{"ERROR bare upper-case word", "ERROR bare upper-case word", "3"},
		{"error: lower case with a colon", "error: lower case with a colon", "3"},
		{"[warn] in brackets", "[warn] in brackets", "4"},
		{"[ERROR]: brackets and a colon", "[ERROR]: brackets and a colon", "3"},
		{"Warning: capitalised with a colon", "Warning: capitalised with a colon", "4"},
		{"WARN short form", "WARN short form", "4"},
		{"info lower case", "info lower case", "6"},
		{"DEBUG: with a colon", "DEBUG: with a colon", "7"},
		{"no prefix at all", "no prefix at all", "6"},
		{"Errors is not a level word", "Errors is not a level word", "6"},
		{"<9 is no prefix", "<9 is no prefix", "6"},
	}
	var lines []string
	for _, c := range cases {
		lines = append(lines, c.line)
	}
	testutil.MustCallTool(t, cs, "fmt__stderr", map[string]any{"text": strings.Join(lines, "\n")})

	// The fake server writes nothing else to stderr, so these are all.
	got := j.AwaitMatch(t, len(cases), childLog("fmt"))
	if len(got) != len(cases) {
		t.Fatalf("%d entries for %d lines:\n%s", len(got), len(cases), journaldtest.Dump(got))
	}
	for i, c := range cases {
		checkFields(t, c.line, got[i], entry{
			"MESSAGE":             c.message,
			"PRIORITY":            c.priority,
			"SYSLOG_IDENTIFIER":   "mcpgate-fmt",
			"MCPGATE_BACKEND":     "fmt",
			"MCPGATE_BACKEND_PID": strconv.Itoa(child),
			"_TRANSPORT":          "journal", // the native protocol, sent by the daemon
			"_PID":                strconv.Itoa(d.PID),
		})
		// mcpgate runs one process per backend: there are no instances.
		if v, ok := got[i]["MCPGATE_INSTANCE"]; ok {
			t.Errorf("%s: MCPGATE_INSTANCE=%q, want none", c.line, v)
		}
	}
}

// longLine returns an "ERROR" line of about n bytes, numbered so that a
// lost or reordered piece shows, made mostly of three-byte characters and
// padded so that a character straddles the first MaxLineBytes boundary.
func longLine(n int) string {
	for pad := 0; ; pad++ {
		var b strings.Builder
		b.WriteString("ERROR " + strings.Repeat("-", pad))
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "%d€€€ ", i)
		}
		if s := b.String(); !utf8.RuneStart(s[journal.MaxLineBytes]) {
			return s
		}
	}
}

// A 300 KiB line arrives in marked pieces of at most 64 KiB, each valid
// UTF-8 and at the line's priority, which put together are the line.
func TestJournalLongStderrLineInMarkedPieces(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, "", "[backends.long]\ncommand = \"FAKE\"\n")
	cs := d.Connect(t, nil)
	line := longLine(300 << 10)
	testutil.MustCallTool(t, cs, "long__stderr", map[string]any{"text": line})

	n := (len(line) + journal.MaxLineBytes - 1) / journal.MaxLineBytes
	pieces := j.AwaitMatch(t, n, childLog("long"))
	if len(pieces) != n {
		t.Fatalf("%d entries, want %d pieces:\n%s", len(pieces), n, journaldtest.Dump(pieces))
	}
	var whole strings.Builder
	for i, p := range pieces {
		m := p["MESSAGE"]
		if !utf8.ValidString(m) {
			t.Errorf("piece %d is not valid UTF-8: the line was cut inside a character", i)
		}
		if p["PRIORITY"] != "3" {
			t.Errorf("piece %d has PRIORITY %s, want the line's 3", i, p["PRIORITY"])
		}
		if i > 0 {
			if !strings.HasPrefix(m, journal.ContinuationMarker) {
				t.Errorf("piece %d does not start with %q", i, journal.ContinuationMarker)
			}
			m = strings.TrimPrefix(m, journal.ContinuationMarker)
		}
		if i < n-1 {
			if !strings.HasSuffix(m, journal.ContinuedMarker) {
				t.Errorf("piece %d does not end with %q", i, journal.ContinuedMarker)
			}
			m = strings.TrimSuffix(m, journal.ContinuedMarker)
		}
		if len(m) > journal.MaxLineBytes {
			t.Errorf("piece %d holds %d bytes of the line, more than %d", i, len(m), journal.MaxLineBytes)
		}
		whole.WriteString(m)
	}
	if whole.String() != line {
		t.Errorf("the pieces make %d bytes that differ from the %d-byte line", whole.Len(), len(line))
	}
}

// MCP notifications/message are journal entries with the level mapped to
// a priority and the logger named, and still reach the client that asked
// for them.
func TestJournalMCPLogMessages(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, "", "[backends.m]\ncommand = \"FAKE\"\n")
	ev := testutil.NewClientEvents("logs")
	cs := d.Connect(t, ev.ClientOptions())
	if err := cs.SetLoggingLevel(testutil.Context(t, 30*time.Second), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	child := strconv.Itoa(testutil.FakeProcess(t, cs, "m__pid").PID)

	levels := []struct{ level, priority string }{
		{"debug", "7"}, {"info", "6"}, {"notice", "5"}, {"warning", "4"},
		{"error", "3"}, {"critical", "2"}, {"alert", "1"}, {"emergency", "0"},
	}
	for _, l := range levels {
		testutil.MustCallTool(t, cs, "m__log", map[string]any{"level": l.level, "logger": "db", "data": "mcp says " + l.level})
	}
	testutil.MustCallTool(t, cs, "m__log", map[string]any{"level": "warning", "data": map[string]any{"table": "users", "rows": 3}})
	testutil.MustCallTool(t, cs, "m__log", map[string]any{"level": "error", "logger": "multi", "data": "first line\nsecond line"})
	// Far more than a datagram holds: this entry takes the memfd path.
	big := strings.Repeat("0123456789abcdef", (300<<10)/16)
	testutil.MustCallTool(t, cs, "m__log", map[string]any{"level": "info", "logger": "big", "data": big})

	got := j.AwaitMatch(t, len(levels)+3, childLog("m"))
	if len(got) != len(levels)+3 {
		t.Fatalf("%d entries, want %d:\n%s", len(got), len(levels)+3, journaldtest.Dump(got))
	}
	backend := entry{"MCPGATE_BACKEND": "m", "MCPGATE_BACKEND_PID": child}
	for i, l := range levels {
		checkFields(t, l.level, got[i], entry{"MESSAGE": "mcp says " + l.level, "PRIORITY": l.priority, "MCPGATE_LOGGER": "db"})
		checkFields(t, l.level, got[i], backend)
	}
	checkFields(t, "JSON data", got[8], entry{"MESSAGE": `{"rows":3,"table":"users"}`, "PRIORITY": "4"})
	if v, ok := got[8]["MCPGATE_LOGGER"]; ok {
		t.Errorf("MCPGATE_LOGGER=%q for a message without a logger", v)
	}
	checkFields(t, "multi-line data", got[9], entry{"MESSAGE": "first line\nsecond line", "PRIORITY": "3", "MCPGATE_LOGGER": "multi"})
	checkFields(t, "large data", got[10], backend)
	if got[10]["MESSAGE"] != big || got[10]["MCPGATE_LOGGER"] != "big" {
		t.Errorf("the large message arrived with %d of its %d bytes, logger %q", len(got[10]["MESSAGE"]), len(big), got[10]["MCPGATE_LOGGER"])
	}

	msgs := ev.Await(t, len(levels)+3, 30*time.Second, "log messages", testutil.Method("notifications/message"))
	for i, l := range levels {
		p, ok := msgs[i].Params.(*mcp.LoggingMessageParams)
		if !ok || string(p.Level) != l.level || p.Logger != "db" || p.Data != "mcp says "+l.level {
			t.Errorf("client got %+v, want level %s from logger db", msgs[i].Params, l.level)
		}
	}
}

// Spamming children are cut to their rate limit — the [gateway] default
// or their own — and one entry says how many lines were suppressed. The
// child is never blocked, the gateway serves it meanwhile, and the ring
// buffer keeps the lines the journal did not get.
func TestJournalRateLimitAndSuppressionSummary(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, `log_rate_limit = "3/1h"`, `
[backends.dflt]
command = "FAKE"

[backends.spam]
command = "FAKE"
log_rate_limit = "10/30s"

[backends.flood]
command = "FAKE"
log_rate_limit = "5/1h"
restart_backoff_initial = "10ms"
`)
	cs := d.Connect(t, nil)

	// dflt has no log_rate_limit of its own: the [gateway] one applies.
	testutil.MustCallTool(t, cs, "dflt__stderr", map[string]any{"text": "dflt line", "repeat": 20})

	// spam: the answer means the child wrote every line, unblocked. The
	// summary comes once the limit lets a line through again, 3 s after
	// the burst: long after the lines were read, so it counts them all.
	const spamLines = 5000
	testutil.MustCallTool(t, cs, "spam__stderr_spam", map[string]any{"lines": spamLines})
	summary := j.AwaitMatch(t, 1, entry{"SYSLOG_IDENTIFIER": "mcpgate-spam", "MESSAGE_ID": journal.MessageSuppressed.String()})[0]
	checkFields(t, "spam summary", summary, entry{
		"PRIORITY":           "4",
		"MCPGATE_BACKEND":    "spam",
		"MCPGATE_SUPPRESSED": strconv.Itoa(spamLines - 10),
		"MESSAGE":            fmt.Sprintf("%d lines suppressed (rate limit 10 per 30s: %d)", spamLines-10, spamLines-10),
	})

	// flood: writes until cancelled. Once its burst is in the journal,
	// every further line is suppressed; a call completes meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	flooding := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "flood__stderr_spam", Arguments: map[string]any{"lines": -1, "prefix": "flood"}})
		flooding <- err
	}()
	j.AwaitMatch(t, 5, childLog("flood"))
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "flood__echo", map[string]any{"text": "through the flood"})); got != "through the flood" {
		t.Errorf("echo during the flood = %q", got)
	}
	select {
	case err := <-flooding:
		t.Fatalf("the flood ended before it was cancelled: %v", err)
	default:
	}
	cancel()
	<-flooding
	// stderr waits for the flood to release the child's stderr.
	testutil.MustCallTool(t, cs, "flood__stderr", map[string]any{"text": "after the flood"})
	testutil.CallTool(t, cs, "flood__crash", nil)
	exit := j.AwaitMatch(t, 1, daemonLog(journal.MessageExit, entry{"MCPGATE_BACKEND": "flood"}))[0]
	tail := strings.Split(exit["MCPGATE_STDERR_TAIL"], "\n")
	lastFlood := -1
	for _, l := range tail {
		if n, err := strconv.Atoi(strings.TrimPrefix(l, "flood ")); err == nil {
			lastFlood = n
		}
	}
	if lastFlood < 5 || !strings.Contains(exit["MCPGATE_STDERR_TAIL"], "after the flood") {
		t.Fatalf("the exit entry's stderr tail %q lacks the suppressed flood lines", tail)
	}

	// Summaries still pending are written when the backends stop.
	d.Terminate(t)
	var es []entry
	j.Await(t, "the summaries of dflt and flood", func(all []entry) bool {
		es = all
		return len(journaldtest.Select(all, entry{"MESSAGE_ID": journal.MessageSuppressed.String()})) >= 3
	})
	for _, c := range []struct {
		backend    string
		lines      []string // the entries that got through
		suppressed int
	}{
		{"dflt", []string{"dflt line", "dflt line", "dflt line"}, 17},
		{"spam", []string{"spam 0", "spam 1", "spam 2", "spam 3", "spam 4", "spam 5", "spam 6", "spam 7", "spam 8", "spam 9"}, spamLines - 10},
		// The flood's lines, "after the flood" and the crash message.
		{"flood", []string{"flood 0", "flood 1", "flood 2", "flood 3", "flood 4"}, lastFlood + 1 + 2 - 5},
	} {
		all := journaldtest.Select(es, childLog(c.backend))
		var msgs []string
		for _, e := range withoutSummaries(all) {
			msgs = append(msgs, e["MESSAGE"])
		}
		if strings.Join(msgs, "|") != strings.Join(c.lines, "|") {
			t.Errorf("%s: entries %q, want %q", c.backend, msgs, c.lines)
		}
		sums := journaldtest.Select(all, entry{"MESSAGE_ID": journal.MessageSuppressed.String()})
		if len(sums) != 1 {
			t.Errorf("%s: %d suppression summaries, want 1:\n%s", c.backend, len(sums), journaldtest.Dump(sums))
			continue
		}
		if n := suppressedCount(t, sums[0]); n != c.suppressed {
			t.Errorf("%s: %d lines reported suppressed, want %d", c.backend, n, c.suppressed)
		}
	}
}

// Whatever journald does — here it is stopped — the child writes on, the
// gateway serves, and every line is either in the journal or counted in a
// summary once journald is back.
func TestJournalStoppedNeverBlocksTheChild(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, "", "[backends.j]\ncommand = \"FAKE\"\nlog_rate_limit = \"off\"\n")
	cs := d.Connect(t, nil)

	j.Suspend(t)
	suspended := true
	t.Cleanup(func() { // before the daemon's cleanup, which logs
		if suspended {
			j.Resume(t)
		}
	})
	// Far more than the pipe, the sink's queue and journald's socket hold.
	const lines = 50000
	testutil.MustCallTool(t, cs, "j__stderr_spam", map[string]any{"lines": lines})
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "j__echo", map[string]any{"text": "journal stopped"})); got != "journal stopped" {
		t.Errorf("echo while journald is stopped = %q", got)
	}
	j.Resume(t)
	suspended = false

	testutil.CallTool(t, cs, "j__crash", nil)
	exit := j.AwaitMatch(t, 1, daemonLog(journal.MessageExit, entry{"MCPGATE_BACKEND": "j"}))[0]
	if !strings.Contains(exit["MCPGATE_STDERR_TAIL"], fmt.Sprintf("spam %d\n", lines-1)) {
		t.Errorf("the ring buffer missed the last spam line; exit entry's tail: %q", exit["MCPGATE_STDERR_TAIL"])
	}
	d.Terminate(t) // writes what is still pending

	// The spam and the crash message: each written or counted.
	const written = lines + 1
	var sums []entry
	var logged, counted int
	j.Await(t, fmt.Sprintf("%d lines of j written or counted as suppressed", written), func(es []entry) bool {
		all := journaldtest.Select(es, childLog("j"))
		sums = journaldtest.Select(all, entry{"MESSAGE_ID": journal.MessageSuppressed.String()})
		logged, counted = len(all)-len(sums), 0
		for _, s := range sums {
			counted += suppressedCount(t, s)
		}
		return logged+counted >= written
	})
	t.Logf("%d lines in the journal, %d counted as suppressed in %d summaries", logged, counted, len(sums))
	if logged+counted != written {
		t.Errorf("%d lines in the journal and %d counted as suppressed; the child wrote %d", logged, counted, written)
	}
	queueFull := false
	for _, s := range sums {
		queueFull = queueFull || strings.Contains(s["MESSAGE"], "queue full")
	}
	if !queueFull {
		t.Errorf("no summary reports a full queue:\n%s", journaldtest.Dump(sums))
	}
}

// A child that exits unexpectedly — by itself or by kill -9 — gets one
// warning entry with its exit status or signal and its last stderr lines;
// restarts, start failures and giving up have their own MESSAGE_IDs.
func TestJournalBackendExitEntries(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, "", `
[backends.c]
command = "FAKE"
restart_backoff_initial = "10ms"

[backends.bad]
command = "FAKE"
args = ["--exit-at-start", "7", "--stderr-at-start", "cannot open database"]
max_restarts = 1
restart_backoff_initial = "10ms"
restart_backoff_max = "10ms"

[backends.missing]
command = "/nonexistent/mcp-server"
max_restarts = 0
`)
	cs := d.Connect(t, nil)
	first := testutil.FakeProcess(t, cs, "c__pid").PID
	// The tail keeps 1 KiB of a line, cut between characters.
	long := strings.Repeat("€", 700)
	testutil.MustCallTool(t, cs, "c__stderr", map[string]any{"text": long + "\nlast words before the crash"})
	testutil.CallTool(t, cs, "c__crash", map[string]any{"code": 3})

	exit := j.AwaitMatch(t, 1, daemonLog(journal.MessageExit, entry{"MCPGATE_BACKEND_PID": strconv.Itoa(first)}))[0]
	checkFields(t, "exit entry", exit, entry{
		"PRIORITY":            "4",
		"MCPGATE_BACKEND":     "c",
		"MCPGATE_EXIT_CODE":   "exited",
		"MCPGATE_EXIT_STATUS": "3",
	})
	for _, want := range []string{"last words before the crash", "crashing as told"} {
		if !strings.Contains(exit["MCPGATE_STDERR_TAIL"], want) || !strings.Contains(exit["MESSAGE"], want) {
			t.Errorf("exit entry lacks the stderr line %q: %s", want, journaldtest.Dump([]entry{exit}))
		}
	}
	if !utf8.ValidString(exit["MESSAGE"]) || !slices.Contains(strings.Split(exit["MCPGATE_STDERR_TAIL"], "\n"), long[:1023]+"…") {
		t.Errorf("exit entry's tail does not hold the long line's first 1023 bytes, cut between characters: %q", exit["MCPGATE_STDERR_TAIL"])
	}
	if want := fmt.Sprintf(`backend "c" (pid %d) exited with status 3; last stderr lines:`+"\n", first); !strings.HasPrefix(exit["MESSAGE"], want) {
		t.Errorf("exit MESSAGE = %q, want it to start %q", exit["MESSAGE"], want)
	}
	checkSource(t, "exit entry", exit, "internal/backend/backend.go", "(*supervision).crashed")
	j.AwaitMatch(t, 1, daemonLog(journal.MessageRestart, entry{"MCPGATE_BACKEND": "c"}))

	// The restarted child, killed with SIGKILL.
	var second string
	j.Await(t, "c's second child to be ready", func(es []entry) bool {
		for _, e := range journaldtest.Select(es, daemonLog(journal.MessageBackendReady, entry{"MCPGATE_BACKEND": "c"})) {
			if pid := e["MCPGATE_BACKEND_PID"]; pid != strconv.Itoa(first) {
				second = pid
				return true
			}
		}
		return false
	})
	pid, _ := strconv.Atoi(second)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	killed := j.AwaitMatch(t, 1, daemonLog(journal.MessageExit, entry{"MCPGATE_BACKEND_PID": second}))[0]
	checkFields(t, "exit entry after kill -9", killed, entry{
		"PRIORITY":            "4",
		"MCPGATE_BACKEND":     "c",
		"MCPGATE_EXIT_CODE":   "killed",
		"MCPGATE_EXIT_STATUS": "9",
		"MCPGATE_SIGNAL":      "SIGKILL",
	})
	if want := fmt.Sprintf(`backend "c" (pid %s) killed by signal SIGKILL`, second); !strings.HasPrefix(killed["MESSAGE"], want) {
		t.Errorf("exit MESSAGE = %q, want it to start %q", killed["MESSAGE"], want)
	}

	// bad exits at start, is restarted once, then given up.
	giveUp := j.AwaitMatch(t, 1, daemonLog(journal.MessageGiveUp, entry{"MCPGATE_BACKEND": "bad"}))[0]
	checkFields(t, "give-up entry", giveUp, entry{"PRIORITY": "3", "MCPGATE_RESTARTS": "1"})
	checkSource(t, "give-up entry", giveUp, "internal/backend/backend.go", "(*supervision).crashed")
	// missing cannot even be spawned.
	startFailed := j.AwaitMatch(t, 1, daemonLog(journal.MessageStartFailed, entry{"MCPGATE_BACKEND": "missing"}))[0]
	checkFields(t, "start-failed entry", startFailed, entry{"PRIORITY": "4"})
	if !strings.Contains(startFailed["MESSAGE"], "/nonexistent/mcp-server") {
		t.Errorf("start-failed entry does not name the command: %s", journaldtest.Dump([]entry{startFailed}))
	}
	checkSource(t, "start-failed entry", startFailed, "internal/backend/backend.go", "(*supervision).crashed")

	es := j.Entries(t)
	badExits := journaldtest.Select(es, daemonLog(journal.MessageExit, entry{"MCPGATE_BACKEND": "bad", "MCPGATE_EXIT_STATUS": "7"}))
	if len(badExits) != 2 {
		t.Errorf("%d exit entries for bad, want 2 (its start and its one restart):\n%s", len(badExits), journaldtest.Dump(badExits))
	}
	for _, e := range badExits {
		if !strings.Contains(e["MCPGATE_STDERR_TAIL"], "cannot open database") {
			t.Errorf("bad's exit entry lacks its stderr: %s", journaldtest.Dump([]entry{e}))
		}
	}
	// One exit entry per exit.
	for _, pid := range []string{strconv.Itoa(first), second} {
		if n := len(journaldtest.Select(es, daemonLog(journal.MessageExit, entry{"MCPGATE_BACKEND_PID": pid}))); n != 1 {
			t.Errorf("%d exit entries for pid %s, want 1", n, pid)
		}
	}
}

// checkSource checks the CODE_ fields of a warning or error entry.
func checkSource(t *testing.T, what string, e entry, file, function string) {
	t.Helper()
	line, err := strconv.Atoi(e["CODE_LINE"])
	if !strings.HasSuffix(e["CODE_FILE"], "/"+file) || err != nil || line <= 0 || !strings.Contains(e["CODE_FUNC"], function) {
		t.Errorf("%s: CODE_FILE=%q CODE_LINE=%q CODE_FUNC=%q; want %s, a line and %s", what, e["CODE_FILE"], e["CODE_LINE"], e["CODE_FUNC"], file, function)
	}
}

// The daemon's own key events carry their MESSAGE_IDs, its warnings and
// errors the source location.
func TestJournalDaemonEntries(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, "", "[backends.own]\ncommand = \"FAKE\"\n")
	cs := d.Connect(t, nil)
	child := strconv.Itoa(testutil.FakeProcess(t, cs, "own__pid").PID)
	daemon := strconv.Itoa(d.PID)

	ready := j.AwaitMatch(t, 1, daemonLog(journal.MessageReady, nil))[0]
	checkFields(t, "ready", ready, entry{"PRIORITY": "6", "_PID": daemon, "_TRANSPORT": "journal"})
	if !strings.Contains(ready["MCPGATE_LISTENERS"], "127.0.0.1") {
		t.Errorf("ready entry names no listener: %s", journaldtest.Dump([]entry{ready}))
	}
	if _, ok := ready["CODE_FILE"]; ok {
		t.Errorf("info entry with CODE_FILE: %s", journaldtest.Dump([]entry{ready}))
	}
	spawn := j.AwaitMatch(t, 1, daemonLog(journal.MessageSpawn, entry{"MCPGATE_BACKEND": "own"}))[0]
	checkFields(t, "spawn", spawn, entry{"PRIORITY": "6", "MCPGATE_BACKEND_PID": child})
	if !strings.Contains(spawn["MCPGATE_COMMAND"], "fakeserver") {
		t.Errorf("spawn entry without the command: %s", journaldtest.Dump([]entry{spawn}))
	}
	j.AwaitMatch(t, 1, daemonLog(journal.MessageBackendReady, entry{"MCPGATE_BACKEND": "own", "MCPGATE_BACKEND_PID": child}))

	// SIGHUP with a broken configuration: an error, with its source.
	good, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.ConfigPath, []byte("[gateway\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
	failed := j.AwaitMatch(t, 1, daemonLog(journal.MessageReloadFailed, nil))[0]
	checkFields(t, "reload failed", failed, entry{"PRIORITY": "3"})
	checkSource(t, "reload failed", failed, "internal/daemon/daemon.go", "(*daemon).reload")

	// SIGHUP with a [gateway] change: a warning, then the reload entry.
	changed := strings.Replace(string(good), "[gateway]\n", "[gateway]\npage_size = 50\n", 1)
	if err := os.WriteFile(d.ConfigPath, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
	j.AwaitMatch(t, 1, daemonLog(journal.MessageReload, entry{"PRIORITY": "6"}))
	var warning entry
	j.Await(t, "the warning that [gateway] changes need a restart", func(es []entry) bool {
		for _, e := range journaldtest.Select(es, entry{"SYSLOG_IDENTIFIER": journal.DefaultIdentifier, "PRIORITY": "4"}) {
			if strings.Contains(e["MESSAGE"], "[gateway]") {
				warning = e
				return true
			}
		}
		return false
	})
	checkSource(t, "[gateway] warning", warning, "internal/daemon/daemon.go", "(*daemon).reload")

	d.Terminate(t)
	stopping := j.AwaitMatch(t, 1, daemonLog(journal.MessageStopping, nil))[0]
	checkFields(t, "stopping", stopping, entry{"PRIORITY": "6", "MCPGATE_SIGNAL": "SIGTERM", "_PID": daemon})
}

// Under systemd, stderr is a journal stream named by JOURNAL_STREAM: with
// log_target = "auto" the daemon then logs natively, its children's lines
// too, and JOURNAL_STREAM does not reach the children.
func TestJournalStreamMakesAutoLogNatively(t *testing.T) {
	j := journaldtest.Start(t)
	stderr, stream := j.Stream(t, "mcpgated-stream")
	toml, url := journalConfig(t, journal.TargetAuto, "", "[backends.s]\ncommand = \"FAKE\"\n")
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{
		Args:   []string{"--journal-socket", j.Socket()},
		Env:    []string{"JOURNAL_STREAM=" + stream},
		Stderr: stderr,
	})
	stderr.Close() // the daemon has its own copy

	ready := j.AwaitMatch(t, 1, daemonLog(journal.MessageReady, nil))[0]
	checkFields(t, "ready", ready, entry{"_TRANSPORT": "journal", "_PID": strconv.Itoa(d.PID)})
	cs := d.Connect(t, nil)
	child := testutil.FakeProcess(t, cs, "s__pid").PID
	testutil.MustCallTool(t, cs, "s__stderr", map[string]any{"text": "<4>via the native protocol"})
	line := j.AwaitMatch(t, 1, childLog("s"))[0]
	checkFields(t, "child's line", line, entry{
		"MESSAGE":             "via the native protocol",
		"PRIORITY":            "4",
		"MCPGATE_BACKEND":     "s",
		"MCPGATE_BACKEND_PID": strconv.Itoa(child),
		"_TRANSPORT":          "journal",
	})
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", child))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(environ), "\x00") {
		if strings.HasPrefix(kv, "JOURNAL_STREAM=") {
			t.Errorf("the child inherited %s", kv)
		}
	}
	d.Terminate(t)
	j.AwaitMatch(t, 1, daemonLog(journal.MessageStopping, nil))
	if raw := journaldtest.Select(j.Entries(t), entry{"SYSLOG_IDENTIFIER": "mcpgated-stream"}); len(raw) > 0 {
		t.Errorf("the daemon wrote plain text to its journal stream:\n%s", journaldtest.Dump(raw))
	}
}

// Without a journal stream, log_target "stderr" and "auto" log text to
// stderr, children's lines and MCP log messages with the backend's name,
// even though a journal listens on --journal-socket.
func TestJournalTextTargets(t *testing.T) {
	for _, target := range []string{journal.TargetStderr, journal.TargetAuto} {
		t.Run(target, func(t *testing.T) {
			j := journaldtest.Start(t)
			toml, url := journalConfig(t, target, "", "[backends.txt]\ncommand = \"FAKE\"\n")
			d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Args: []string{"--journal-socket", j.Socket()}})
			cs := d.Connect(t, nil)
			child := testutil.FakeProcess(t, cs, "txt__pid").PID
			testutil.MustCallTool(t, cs, "txt__stderr", map[string]any{"text": "hello from txt"})
			testutil.MustCallTool(t, cs, "txt__log", map[string]any{"level": "warning", "logger": "db", "data": "mcp in text"})
			for _, want := range []*regexp.Regexp{
				regexp.MustCompile(fmt.Sprintf(`level=INFO msg="hello from txt" backend=txt backend_pid=%d `, child)),
				regexp.MustCompile(`level=WARN msg="mcp in text" backend=txt .*logger=db`),
			} {
				d.Stderr.Await(t, 30*time.Second, want.String(), func(out string) bool { return want.MatchString(out) })
			}
			d.Terminate(t)
			es := j.Entries(t)
			for _, m := range []entry{{"SYSLOG_IDENTIFIER": journal.DefaultIdentifier}, childLog("txt")} {
				if got := journaldtest.Select(es, m); len(got) > 0 {
					t.Errorf("log_target %q wrote to the journal:\n%s", target, journaldtest.Dump(got))
				}
			}
		})
	}
}
