package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/bench/internal/load"
)

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{
		"mcpgate":           "mcpgate-base",
		"mcpgate-shared":    "mcpgate-shared-base",
		"mcpgate-stateless": "mcpgate-base-stateless",
	} {
		if got := BaseName(in); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every configuration's run is paired with the baseline build's run of it
// in the same load, and only those: the floor and runs without a
// baseline twin are left out, and the table says how each moved.
func TestComparisons(t *testing.T) {
	r := results()
	r.Gateways = append(r.Gateways, "mcpgate-base")
	add := func(g string, sessions int, thr, p99, cpu float64) {
		r.Load = append(r.Load, LoadRun{Scenario: "sessions", Backend: "benchecho", Gateway: g, Sessions: sessions, Payload: 1024,
			Result: &load.Result{CallsPerSec: thr, P99: p99}, CPUPerCall: cpu})
	}
	r.Find("sessions", "mcpgate", 64, 1024).CPUPerCall = 45
	add("mcpgate-base", 64, 1600, 75, 50)
	add("mcpgate-stateless", 64, 1500, 80, 60)
	add("mcpgate-base-stateless", 64, 1500, 80, 60)
	cs := r.Comparisons()
	if len(cs) != 2 || cs[0].Gateway != "mcpgate" || cs[0].BaseCPU != 50 || cs[1].Gateway != "mcpgate-stateless" {
		t.Fatalf("Comparisons = %+v; want mcpgate and mcpgate-stateless at 64 sessions", cs)
	}
	var out bytes.Buffer
	PrintComparisons(&out, "HEAD~1", r)
	for _, want := range []string{"HEAD~1", "45.0", "50.0", "-10%", "+25%", "-20%", "+0%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	for _, tg := range r.Targets() {
		if strings.Contains(tg.Name, "mcpgate-base") {
			t.Errorf("target %q: the baseline build is no peer", tg.Name)
		}
	}
	out.Reset()
	PrintComparisons(&out, "HEAD", results())
	if !strings.Contains(out.String(), "no load ran on both builds") {
		t.Errorf("without baseline runs:\n%s", out.String())
	}
}
