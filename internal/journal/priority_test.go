package journal

import (
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// priorityCases are the prefix styles ParsePriority knows and lines that
// must not match.
var priorityCases = []struct {
	line string
	prio int
	msg  string // "" means the line itself
}{
	{"<0>emergency", 0, "emergency"},
	{"<3>disk on fire", 3, "disk on fire"},
	{"<7>", 7, " "}, // msg is empty; the table below adds a space
	{"<4> spaced", 4, " spaced"},
	{"<13>syslog user.notice", 5, "syslog user.notice"},
	{"<191>max facility", 7, "max facility"},
	{"<192>too big", 6, ""},
	{"<8", 6, ""},
	{"<>empty", 6, ""},
	{"<x>not a number", 6, ""},
	{"ERROR something broke", 3, ""},
	{"error: something broke", 3, ""},
	{"Error something broke", 3, ""},
	{"ERR something broke", 3, ""},
	{"[ERROR] bracketed", 3, ""},
	{"[error]: bracketed colon", 3, ""},
	{"WARN careful", 4, ""},
	{"warning: careful", 4, ""},
	{"[Warning] careful", 4, ""},
	{"INFO hello", 6, ""},
	{"info: hello", 6, ""},
	{"DEBUG details", 7, ""},
	{"[debug] details", 7, ""},
	{"TRACE details", 7, ""},
	{"NOTICE heads up", 5, ""},
	{"CRIT dying", 2, ""},
	{"critical: dying", 2, ""},
	{"FATAL dead", 2, ""},
	{"ALERT act now", 1, ""},
	{"EMERG all gone", 0, ""},
	{"panic: runtime error", 0, ""},
	{"ERROR", 3, ""},
	{"warn\ttabbed", 4, ""},
	{"Errors were found", 6, ""},
	{"INFORMATION", 6, ""},
	{"INFO_x", 6, ""},
	{"[ERROR no bracket end", 6, ""},
	{"[ ERROR ]", 6, ""},
	{" ERROR leading space", 6, ""},
	{"plain text", 6, ""},
	{"", 6, ""},
}

func TestParsePriority(t *testing.T) {
	for _, tc := range priorityCases {
		prio, msg := ParsePriority([]byte(tc.line))
		want := tc.msg
		if want == "" {
			want = tc.line
		} else if want == " " {
			want = ""
		}
		if prio != tc.prio || string(msg) != want {
			t.Errorf("ParsePriority(%q) = %d, %q; want %d, %q", tc.line, prio, msg, tc.prio, want)
		}
	}
}

func TestParsePriorityAllocs(t *testing.T) {
	line := []byte("[warning]: something")
	if n := testing.AllocsPerRun(100, func() { ParsePriority(line) }); n != 0 {
		t.Errorf("ParsePriority allocates %v times", n)
	}
}

// TestParsePriorityJournald writes every prefix style through a BackendLog
// to a real journald and checks PRIORITY and MESSAGE.
func TestParsePriorityJournald(t *testing.T) {
	j, w := realJournal(t)
	bl := NewBackendLog(w, BackendLogOptions{Backend: "prio", PID: 4242})
	for i, tc := range priorityCases {
		// A distinct suffix finds each line; it does not change parsing
		// except for the bare "<7>" and "ERROR", which stay prefixes.
		bl.Line([]byte(fmt.Sprintf("%s #%d", tc.line, i)), false)
	}
	bl.Close()
	got := j.AwaitMatch(t, len(priorityCases), journaldtest.Entry{"MCPGATE_BACKEND": "prio"})
	for i, tc := range priorityCases {
		e := got[i]
		want := tc.msg
		if want == "" {
			want = tc.line
		} else if want == " " {
			want = ""
		}
		want += fmt.Sprintf(" #%d", i)
		if e["PRIORITY"] != strconv.Itoa(tc.prio) || e["MESSAGE"] != want {
			t.Errorf("line %q: PRIORITY=%s MESSAGE=%q; want %d, %q", tc.line, e["PRIORITY"], e["MESSAGE"], tc.prio, want)
		}
		if e["SYSLOG_IDENTIFIER"] != "mcpgate-prio" || e["MCPGATE_BACKEND_PID"] != "4242" {
			t.Errorf("line %q: fields %v", tc.line, e)
		}
		if _, ok := e["MCPGATE_INSTANCE"]; ok {
			t.Errorf("line %q: MCPGATE_INSTANCE without an instance", tc.line)
		}
	}
}

func TestLevelPriority(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		prio  int
	}{
		{slog.LevelDebug - 4, 7}, {slog.LevelDebug, 7}, {slog.LevelInfo - 1, 7},
		{slog.LevelInfo, 6}, {slog.LevelInfo + 1, 6},
		{LevelNotice, 5}, {slog.LevelWarn - 1, 5},
		{slog.LevelWarn, 4}, {slog.LevelError - 1, 4},
		{slog.LevelError, 3}, {LevelCritical, 2}, {LevelAlert, 1},
		{LevelEmergency, 0}, {LevelEmergency + 100, 0},
	} {
		if got := LevelPriority(tc.level); got != tc.prio {
			t.Errorf("LevelPriority(%v) = %d, want %d", tc.level, got, tc.prio)
		}
	}
}

func TestMCPLevelPriority(t *testing.T) {
	for _, tc := range []struct {
		level string
		prio  int
		ok    bool
	}{
		{"debug", 7, true}, {"info", 6, true}, {"notice", 5, true},
		{"warning", 4, true}, {"error", 3, true}, {"critical", 2, true},
		{"alert", 1, true}, {"emergency", 0, true}, {"WARNING", 4, true},
		{"warn", 6, false}, {"", 6, false}, {"verbose", 6, false},
	} {
		prio, ok := MCPLevelPriority(tc.level)
		if prio != tc.prio || ok != tc.ok {
			t.Errorf("MCPLevelPriority(%q) = %d, %v; want %d, %v", tc.level, prio, ok, tc.prio, tc.ok)
		}
	}
}
