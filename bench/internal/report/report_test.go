package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/bench/internal/load"
)

// results is a small run: the floor, mcpgate and one peer at 1 and 64
// sessions, the peer failing one load.
func results() *Results {
	run := func(g string, sessions int, thr, p50, p99 float64) LoadRun {
		return LoadRun{Scenario: "sessions", Backend: "benchecho", Gateway: g, Sessions: sessions, Payload: 1024,
			Result: &load.Result{Sessions: sessions, Payload: 1024, Calls: 100, CallsPerSec: thr, P50: p50, P99: p99}}
	}
	failed := LoadRun{Scenario: "payload", Backend: "benchecho", Gateway: "peer", Sessions: 16, Payload: 1 << 20, Skipped: "every call failed: HTTP 413 | too large"}
	return &Results{
		Gateways: []string{"floor", "mcpgate", "peer"},
		Versions: map[string]string{"mcpgate": "v1"},
		Load: []LoadRun{
			run("floor", 1, 1000, 1.0, 2.0), run("mcpgate", 1, 900, 1.1, 2.2), run("peer", 1, 100, 10, 40),
			run("floor", 64, 2000, 30, 60), run("mcpgate", 64, 2000, 30, 60), run("peer", 64, 200, 300, 600),
			failed,
		},
		Large:   []LargeRun{{Gateway: "floor", Bytes: 50_000_000, Seconds: 1, PeakRSSKiB: 100_000, PeakOverRes: 2}, {Gateway: "mcpgate", Bytes: 50_000_000, Seconds: 1, PeakRSSKiB: 200_000, PeakOverRes: 4}},
		Startup: []StartupRun{{Backends: 10, ReadyMs: 30, HandshakeMs: 20, OverMs: 10, RSSKiB: 20 << 10}},
	}
}

func TestTargets(t *testing.T) {
	verdicts := map[string]string{}
	for _, tg := range results().Targets() {
		verdicts[tg.Name] = tg.Verdict()
	}
	for name, want := range map[string]string{
		"mcpgate p50 at 1 session ÷ floor":                     "1.10× (target ≤ 1.10×): met",
		"mcpgate throughput at 64 sessions ÷ floor":            "1.00× (target ≥ 0.95×): met",
		"mcpgate throughput at 64 sessions ÷ peer":             "10.00× (target ≥ 5.00×): met",
		"peer p99 at 64 sessions ÷ mcpgate":                    "10.00× (target ≥ 4.00×): met",
		"mcpgate peak RSS ÷ size of the 50 MB result":          "4.00× (target ≤ 1.50×): MISSED",
		"mcpgate time to pass the large result ÷ floor":        "1.00× (target ≤ 1.20×): met",
		"mcpgated RSS with 10 idle backends":                   "20.0 MiB (target ≤ 30.0 MiB): met",
		"mcpgate memory per idle session":                      "not measured: no idle run",
		"READY=1 with 10 backends after the slowest handshake": "10.0 ms (target ≤ 20.0 ms): met",
	} {
		if got := verdicts[name]; got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

func TestUpdateMarkdown(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "BENCHMARKS.md")
	plots := filepath.Join(dir, "plots")
	if err := os.Mkdir(plots, 0o755); err != nil {
		t.Fatal(err)
	}
	before, after := "# Benchmarks\n\nprose\n\n", "\nafter\n"
	if err := os.WriteFile(md, []byte(before+BeginMarker+"\nold\n"+EndMarker+after), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateMarkdown(md, plots, filepath.Join(dir, "results", "run.json"), results()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{
		before + BeginMarker, EndMarker + after,
		"![p50](plots/p50.svg)", "[run.json](results/run.json)",
		"| 64 | 1 KiB | **mcpgate** | 2000 |",
		`| 16 | 1 MiB | peer | every call failed: HTTP 413 \| too large |`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\nold\n") {
		t.Error("the old generated section is still there")
	}
	for _, name := range []string{"p50.svg", "p99.svg", "throughput.svg"} {
		svg, err := os.ReadFile(filepath.Join(plots, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(svg, new(struct{})); err != nil {
			t.Errorf("%s is not well-formed XML: %v", name, err)
		}
		if n := strings.Count(string(svg), "<polyline"); n != 3 {
			t.Errorf("%s has %d lines, want one per gateway (3)", name, n)
		}
	}
}

func TestUpdateMarkdownWithoutMarkers(t *testing.T) {
	md := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(md, []byte("# no section\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := UpdateMarkdown(md, t.TempDir(), "r.json", results())
	if err == nil || !strings.Contains(err.Error(), BeginMarker) {
		t.Errorf("UpdateMarkdown without markers: %v, want an error naming the marker to add", err)
	}
}
