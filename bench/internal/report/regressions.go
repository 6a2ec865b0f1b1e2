package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// Regression is a load whose CPU time per call rose from one run to the
// next, with the floor's change in the same load for context: when the
// floor moved as much, the machine did.
type Regression struct {
	LoadKey
	Gateway       string
	Before, After float64 // CPU µs per call
	Floor         float64 // the floor's After ÷ Before in the same load; 0 if unknown
}

// Change is After ÷ Before.
func (g Regression) Change() float64 { return g.After / g.Before }

// Regressions compares every load run of cur with the same run of prev
// (scenario, backend, gateway, sessions, payload) and returns those whose
// CPU time per call rose by more than threshold (0.05: 5%).
func Regressions(prev, cur *Results, threshold float64) []Regression {
	var out []Regression
	for _, l := range cur.Load {
		p := prev.Find(l.Scenario, l.Gateway, l.Sessions, l.Payload)
		if p == nil || p.Backend != l.Backend || p.CPUPerCall <= 0 || l.CPUPerCall <= 0 {
			continue
		}
		if l.CPUPerCall/p.CPUPerCall <= 1+threshold {
			continue
		}
		g := Regression{LoadKey: LoadKey{l.Scenario, l.Backend, l.Sessions, l.Payload}, Gateway: l.Gateway, Before: p.CPUPerCall, After: l.CPUPerCall}
		if f, pf := cur.Find(l.Scenario, "floor", l.Sessions, l.Payload), prev.Find(l.Scenario, "floor", l.Sessions, l.Payload); f != nil && pf != nil && pf.CPUPerCall > 0 {
			g.Floor = f.CPUPerCall / pf.CPUPerCall
		}
		out = append(out, g)
	}
	return out
}

// PrintRegressions writes the regressions of cur against prev (from the
// file prevPath) as a table, or says there are none.
func PrintRegressions(w io.Writer, prevPath string, prev, cur *Results, threshold float64) {
	regs := Regressions(prev, cur, threshold)
	fmt.Fprintf(w, "\nCPU per call against the previous run (%s, %s):\n", filepath.Base(prevPath), prev.Date)
	if len(regs) == 0 {
		fmt.Fprintf(w, "no load run's CPU per call rose by more than %.0f%%\n", threshold*100)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tbackend\tsessions\tpayload\tgateway\tbefore µs\tafter µs\tchange\tfloor's change\t")
	for _, g := range regs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.1f\t%.1f\t%+.0f%%\t%s\t\n", g.Scenario, g.Backend, g.Sessions, Size(g.Payload), g.Gateway,
			g.Before, g.After, (g.Change()-1)*100, pct(g.Floor))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d load runs' CPU per call rose by more than %.0f%%\n", len(regs), threshold*100)
}

func pct(f float64) string {
	if f == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.0f%%", (f-1)*100)
}

// Previous returns the newest whole run's results in dir other than the
// file exclude: not a quick, partial or baseline run, by the date they
// record.
func Previous(dir, exclude string) (string, *Results, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return "", nil, err
	}
	type found struct {
		path string
		r    *Results
	}
	var all []found
	for _, p := range paths {
		if sameFile(p, exclude) || strings.HasSuffix(p, "-partial.json") || strings.HasSuffix(p, "-quick.json") {
			continue
		}
		r, err := Read(p)
		if err != nil || r.Quick || r.Baseline != "" {
			continue
		}
		all = append(all, found{p, r})
	}
	if len(all) == 0 {
		return "", nil, os.ErrNotExist
	}
	sort.Slice(all, func(i, j int) bool { return all[i].r.Date > all[j].r.Date })
	return all[0].path, all[0].r, nil
}

func sameFile(a, b string) bool {
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}
