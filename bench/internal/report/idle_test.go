package report

import (
	"bytes"
	"strings"
	"testing"
)

// The idle sessions at scale add a target of their own beside the one
// of the thousand sessions, and a table; the floor's run sets no target.
func TestIdleAtScale(t *testing.T) {
	r := &Results{
		Idle: []IdleRun{{Gateway: "mcpgate", Idle: 1000, BytesPerSession: 4000}},
		IdleAtScale: []IdleRun{
			{Gateway: "floor", Idle: 20000, RSSBeforeKiB: 7 << 10, RSSAfterKiB: 8 << 10, BytesPerSession: 52},
			{Gateway: "mcpgate", Idle: 20000, RSSBeforeKiB: 16 << 10, RSSAfterKiB: 46 << 10, BytesPerSession: 1536},
		},
	}
	var verdicts []string
	for _, tg := range r.Targets() {
		if strings.Contains(tg.Name, "idle session") {
			verdicts = append(verdicts, tg.Name+": "+tg.Verdict())
		}
	}
	want := []string{
		"mcpgate RSS growth per idle session (1000 sessions): 4000 B (target ≤ 3072 B): MISSED",
		"mcpgate RSS growth per idle session (20000 sessions): 1536 B (target ≤ 3072 B): met",
	}
	if strings.Join(verdicts, "\n") != strings.Join(want, "\n") {
		t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(verdicts, "\n"), strings.Join(want, "\n"))
	}
	var md bytes.Buffer
	Markdown(&md, r, "bench/results/x.json", nil)
	for _, row := range []string{
		"### Idle sessions at scale (20000 idle sessions",
		"| floor | 7.0 | 8.0 | 52 |  |",
		"| **mcpgate** | 16.0 | 46.0 | 1536 |  |",
	} {
		if !strings.Contains(md.String(), row) {
			t.Errorf("markdown lacks %q:\n%s", row, md.String())
		}
	}
}
