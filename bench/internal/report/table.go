package report

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// LoadKey names one load: a scenario at a number of sessions and payload.
type LoadKey struct {
	Scenario, Backend string
	Sessions, Payload int
}

// Loads returns the distinct loads of r in the order they were run.
func (r *Results) Loads() []LoadKey {
	var keys []LoadKey
	seen := map[LoadKey]bool{}
	for _, l := range r.Load {
		k := LoadKey{l.Scenario, l.Backend, l.Sessions, l.Payload}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// Row is one gateway under one load with its ratios to the floor and to
// mcpgate in the same run; a ratio is 0 where it cannot be computed.
type Row struct {
	LoadKey
	Run                      *LoadRun
	ThrVsFloor, ThrVsMCPGate float64 // calls/s ÷ theirs
	P50VsFloor, P50VsMCPGate float64 // p50 ÷ theirs
	P99VsFloor, P99VsMCPGate float64 // p99 ÷ theirs
	CPUVsFloor, CPUVsMCPGate float64 // CPU per call ÷ theirs
}

// Rows returns a row per gateway and load.
func (r *Results) Rows() []Row {
	var rows []Row
	for _, k := range r.Loads() {
		floor := r.Find(k.Scenario, "floor", k.Sessions, k.Payload)
		mine := r.Find(k.Scenario, "mcpgate", k.Sessions, k.Payload)
		for _, g := range r.allGateways() {
			run := r.Find(k.Scenario, g, k.Sessions, k.Payload)
			if run == nil {
				continue
			}
			row := Row{LoadKey: k, Run: run}
			row.ThrVsFloor = ratio(run, floor, func(r *LoadRun) float64 { return r.Result.CallsPerSec })
			row.ThrVsMCPGate = ratio(run, mine, func(r *LoadRun) float64 { return r.Result.CallsPerSec })
			row.P50VsFloor = ratio(run, floor, func(r *LoadRun) float64 { return r.Result.P50 })
			row.P50VsMCPGate = ratio(run, mine, func(r *LoadRun) float64 { return r.Result.P50 })
			row.P99VsFloor = ratio(run, floor, func(r *LoadRun) float64 { return r.Result.P99 })
			row.P99VsMCPGate = ratio(run, mine, func(r *LoadRun) float64 { return r.Result.P99 })
			row.CPUVsFloor = ratio(run, floor, func(r *LoadRun) float64 { return r.CPUPerCall })
			row.CPUVsMCPGate = ratio(run, mine, func(r *LoadRun) float64 { return r.CPUPerCall })
			rows = append(rows, row)
		}
	}
	return rows
}

func ratio(a, b *LoadRun, f func(*LoadRun) float64) float64 {
	if a == nil || b == nil || a.Result == nil || b.Result == nil || f(b) == 0 {
		return 0
	}
	return f(a) / f(b)
}

// Size formats a byte count as "1 KiB", "64 KiB", "1 MiB".
func Size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1_000_000:
		return fmt.Sprintf("%g MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%d B", n)
}

func x(f float64) string {
	if f == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", f)
}

// Summary prints the results as plain tables.
func Summary(w io.Writer, r *Results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tbackend\tsessions\tpayload\tgateway\tcalls/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\tthr/floor\tp50/floor\tp99/floor\tthr/mcpgate\tp50/mcpgate\tp99/mcpgate\tCPU µs/call\tCPU/floor\tRSS MiB\t")
	for _, row := range r.Rows() {
		l := row.Run
		if l.Skipped != "" || l.Result == nil {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t\n", row.Scenario, row.Backend, row.Sessions, Size(row.Payload), l.Gateway, l.Skipped)
			continue
		}
		res := l.Result
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.1f\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%.1f\t\n",
			row.Scenario, row.Backend, row.Sessions, Size(row.Payload), l.Gateway, res.CallsPerSec, res.P50, res.P90, res.P99, res.Max, res.Errors,
			x(row.ThrVsFloor), x(row.P50VsFloor), x(row.P99VsFloor), x(row.ThrVsMCPGate), x(row.P50VsMCPGate), x(row.P99VsMCPGate), l.CPUPerCall, x(row.CPUVsFloor), float64(l.RSSKiB)/1024)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, l := range r.Large {
		fmt.Fprintf(w, "large %-12s %s in %.2fs, peak RSS %.1f MiB (%.2f× the result) %s\n", l.Gateway, Size(l.Bytes), l.Seconds, float64(l.PeakRSSKiB)/1024, l.PeakOverRes, l.Error)
	}
	for _, i := range r.Idle {
		busy := ""
		if i.Busy != nil {
			busy = fmt.Sprintf("busy p50 %.3f ms p99 %.3f ms %.0f calls/s", i.Busy.P50, i.Busy.P99, i.Busy.CallsPerSec)
		}
		fmt.Fprintf(w, "idle  %-12s %d sessions: %.0f bytes each (%d processes); %s %s\n", i.Gateway, i.Idle, i.BytesPerSession, i.Processes, busy, i.Error)
	}
	for _, i := range r.IdleAtScale {
		fmt.Fprintf(w, "idle  %-12s %d sessions: %.0f bytes each %s\n", i.Gateway, i.Idle, i.BytesPerSession, i.Error)
	}
	for _, s := range r.Startup {
		fmt.Fprintf(w, "startup %d backends: READY=1 after %.1f ms, slowest handshake %.1f ms, over it %.1f ms, RSS %.1f MiB %s\n",
			s.Backends, s.ReadyMs, s.HandshakeMs, s.OverMs, float64(s.RSSKiB)/1024, s.Error)
	}
	for _, t := range r.Targets() {
		fmt.Fprintf(w, "target %-60s %s\n", t.Name+":", t.Verdict())
	}
}

// allGateways returns the compared gateways, then the variants of one
// that a scenario of its own measures (mcpgate with a token, with OAuth),
// in the order they were run.
func (r *Results) allGateways() []string {
	names := slices.Clone(r.Gateways)
	for _, l := range r.Load {
		if !slices.Contains(names, l.Gateway) {
			names = append(names, l.Gateway)
		}
	}
	return names
}

// sessionsOf returns the numbers of sessions scenario ran with.
func (r *Results) sessionsOf(scenario string) []int {
	var out []int
	for _, k := range r.Loads() {
		if k.Scenario == scenario {
			out = append(out, k.Sessions)
		}
	}
	return out
}
