package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// StatelessSuffix names a gateway's stateless variant: the same process,
// driven by 2026-07-28 clients instead of sessions.
const StatelessSuffix = "-stateless"

// BaseSuffix names the baseline build's run of a configuration:
// "mcpgate-base" is the baseline build run as "mcpgate" is.
const BaseSuffix = "-base"

// BaseName returns the name under which the baseline build runs the
// configuration named gateway ("mcpgate-stateless" becomes
// "mcpgate-base-stateless": a stateless variant keeps its suffix last).
func BaseName(gateway string) string {
	if name, ok := strings.CutSuffix(gateway, StatelessSuffix); ok {
		return name + BaseSuffix + StatelessSuffix
	}
	return gateway + BaseSuffix
}

// isBase reports whether gateway is the baseline build running one of
// mcpgate's configurations (see BaseName).
func isBase(gateway string) bool { return strings.Contains(gateway, BaseSuffix) }

// Comparison is one load driven through this build and the baseline build
// of one configuration, in the same rounds.
type Comparison struct {
	LoadKey
	Gateway      string  // this build's configuration; the baseline's is BaseName(Gateway)
	CPU, BaseCPU float64 // µs per call
	Thr, BaseThr float64 // calls/s
	P99, BaseP99 float64 // ms
	// Fastest and Slowest are the least and the greatest ratio of CPU per
	// call to the baseline's in one round: how far apart two builds
	// measure when noise falls on both alike; 0 when not measured.
	Fastest, Slowest float64
}

// Comparisons pairs every load run of a configuration with the baseline
// build's run of it in the same load.
func (r *Results) Comparisons() []Comparison {
	var out []Comparison
	for _, l := range r.Load {
		if l.Result == nil || isBase(l.Gateway) {
			continue
		}
		base := r.Find(l.Scenario, BaseName(l.Gateway), l.Sessions, l.Payload)
		if base == nil || base.Result == nil {
			continue
		}
		c := Comparison{LoadKey: LoadKey{l.Scenario, l.Backend, l.Sessions, l.Payload}, Gateway: l.Gateway,
			CPU: l.CPUPerCall, BaseCPU: base.CPUPerCall, Thr: l.Result.CallsPerSec, BaseThr: base.Result.CallsPerSec,
			P99: l.Result.P99, BaseP99: base.Result.P99}
		c.Fastest, c.Slowest = spread(l.RoundCPU, base.RoundCPU)
		out = append(out, c)
	}
	return out
}

// PrintComparisons writes this build against the baseline build (named
// base) in every load both ran, or says there is no such load.
func PrintComparisons(w io.Writer, base string, r *Results) {
	cs := r.Comparisons()
	fmt.Fprintf(w, "\nThis build against the baseline build (%s), in the same rounds:\n", base)
	if len(cs) == 0 {
		fmt.Fprintln(w, "no load ran on both builds")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tbackend\tsessions\tpayload\tgateway\tCPU µs/call\tbaseline\tchange\tin its rounds\tcalls/s change\tp99 change\t")
	for _, c := range cs {
		rounds := "–"
		if c.Fastest > 0 {
			rounds = pct(c.Fastest) + " to " + pct(c.Slowest)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t\n", c.Scenario, c.Backend, c.Sessions, Size(c.Payload), c.Gateway,
			c.CPU, c.BaseCPU, change(c.CPU, c.BaseCPU), rounds, change(c.Thr, c.BaseThr), change(c.P99, c.BaseP99))
	}
	tw.Flush()
	if g, n := GeoMeanCPU(cs); n > 1 {
		fmt.Fprintf(w, "CPU per call over the %d loads (geometric mean of the ratios): %s\n", n, pct(g))
	}
	fmt.Fprintln(w, "A change within its rounds' spread is not told apart from noise: run it again, or for longer.")
}

// GeoMeanCPU is the geometric mean of the ratios of CPU per call to the
// baseline's over the comparisons that measured both, and how many did.
// One load's ratio moves by up to 10% between two runs of one build here;
// over a dozen loads the mean moves much less.
func GeoMeanCPU(cs []Comparison) (mean float64, n int) {
	var sum float64
	for _, c := range cs {
		if c.CPU > 0 && c.BaseCPU > 0 {
			sum += math.Log(c.CPU / c.BaseCPU)
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return math.Exp(sum / float64(n)), n
}

// spread returns the least and the greatest ratio of cpu to base in one
// round, or zeros unless both measured every round of two or more.
func spread(cpu, base []float64) (least, greatest float64) {
	if len(cpu) < 2 || len(cpu) != len(base) {
		return 0, 0
	}
	for i := range cpu {
		if cpu[i] <= 0 || base[i] <= 0 {
			return 0, 0
		}
		r := cpu[i] / base[i]
		if i == 0 || r < least {
			least = r
		}
		if i == 0 || r > greatest {
			greatest = r
		}
	}
	return least, greatest
}

// change is a ÷ b as a signed percentage, or "–".
func change(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	return pct(a / b)
}
