package report

import (
	"bytes"
	"math"
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
	mine := r.Find("sessions", "mcpgate", 64, 1024)
	mine.CPUPerCall, mine.RoundCPU = 45, []float64{40, 50, 45}
	add("mcpgate-base", 64, 1600, 75, 50)
	r.Find("sessions", "mcpgate-base", 64, 1024).RoundCPU = []float64{50, 50, 50}
	add("mcpgate-stateless", 64, 1500, 80, 60)
	add("mcpgate-base-stateless", 64, 1500, 80, 60)
	r.Find("sessions", "mcpgate-stateless", 64, 1024).RoundCPU = []float64{60} // one round: no spread
	r.Find("sessions", "mcpgate-base-stateless", 64, 1024).RoundCPU = []float64{60}
	cs := r.Comparisons()
	if len(cs) != 2 || cs[0].Gateway != "mcpgate" || cs[0].BaseCPU != 50 || cs[1].Gateway != "mcpgate-stateless" {
		t.Fatalf("Comparisons = %+v; want mcpgate and mcpgate-stateless at 64 sessions", cs)
	}
	if cs[0].Fastest != 0.8 || cs[0].Slowest != 1 || cs[1].Fastest != 0 {
		t.Errorf("spread in the rounds: %v to %v and %v; want 0.8 to 1, and none of one round", cs[0].Fastest, cs[0].Slowest, cs[1].Fastest)
	}
	var out bytes.Buffer
	PrintComparisons(&out, "HEAD~1", r)
	if g, n := GeoMeanCPU(cs); n != 2 || math.Abs(g-math.Sqrt(0.9)) > 1e-9 {
		t.Errorf("GeoMeanCPU = %v over %d loads; want √0.9 over 2", g, n)
	}
	for _, want := range []string{"HEAD~1", "45.0", "50.0", "-10%", "-20% to +0%", "+25%", "+0%", "over the 2 loads (geometric mean of the ratios): -5%"} {
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
