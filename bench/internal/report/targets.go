package report

import "fmt"

// Target is one of the targets, evaluated on a run. The targets are
// reported, never asserted.
type Target struct {
	Name   string
	Value  float64
	Limit  float64
	AtMost bool   // met when Value ≤ Limit, else when Value ≥ Limit
	Unit   string // "×", "ms", "MiB", "B"
	Absent string // why it could not be evaluated
}

// Met reports whether the target was met.
func (t Target) Met() bool {
	if t.Absent != "" {
		return false
	}
	if t.AtMost {
		return t.Value <= t.Limit
	}
	return t.Value >= t.Limit
}

// Verdict is "1.05× (target ≤ 1.15×): met".
func (t Target) Verdict() string {
	if t.Absent != "" {
		return "not measured: " + t.Absent
	}
	op, verdict := "≥", "MISSED"
	if t.AtMost {
		op = "≤"
	}
	if t.Met() {
		verdict = "met"
	}
	return fmt.Sprintf("%s (target %s %s): %s", num(t.Value, t.Unit), op, num(t.Limit, t.Unit), verdict)
}

func num(v float64, unit string) string {
	switch unit {
	case "×":
		return fmt.Sprintf("%.2f×", v)
	case "B":
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// Targets evaluates the targets on r.
func (r *Results) Targets() []Target {
	get := func(g string, sessions int, f func(*LoadRun) float64) (float64, string) {
		l := r.Find("sessions", g, sessions, 1024)
		if l == nil || l.Result == nil {
			return 0, fmt.Sprintf("no %d-session run of %s", sessions, g)
		}
		return f(l), ""
	}
	thr := func(l *LoadRun) float64 { return l.Result.CallsPerSec }
	p50 := func(l *LoadRun) float64 { return l.Result.P50 }
	p99 := func(l *LoadRun) float64 { return l.Result.P99 }
	// rel is a/b for gateways a and b at sessions, by f.
	rel := func(name string, a, b string, sessions int, f func(*LoadRun) float64, limit float64, atMost bool) Target {
		t := Target{Name: name, Limit: limit, AtMost: atMost, Unit: "×"}
		va, why := get(a, sessions, f)
		vb, why2 := get(b, sessions, f)
		switch {
		case why != "":
			t.Absent = why
		case why2 != "":
			t.Absent = why2
		case vb == 0:
			t.Absent = "zero"
		default:
			t.Value = va / vb
		}
		return t
	}
	cpu := func(l *LoadRun) float64 { return l.CPUPerCall }
	ts := []Target{
		rel("mcpgate p50 at 1 session ÷ floor", "mcpgate", "floor", 1, p50, 1.10, true),
		rel("mcpgate throughput at 64 sessions ÷ floor", "mcpgate", "floor", 64, thr, 0.95, false),
		rel("mcpgate p99 at 64 sessions ÷ floor", "mcpgate", "floor", 64, p99, 1.1, true),
		rel("mcpgate CPU per call at 1 session ÷ floor", "mcpgate", "floor", 1, cpu, 1.15, true),
		rel("mcpgate CPU per call at 64 sessions ÷ floor", "mcpgate", "floor", 64, cpu, 1.15, true),
	}
	// The shared host (token, 20-rule policy, audit, limits), measured
	// beside the floor in a scenario of its own.
	for _, sessions := range r.sessionsOf("shared") {
		t := Target{Name: fmt.Sprintf("mcpgate-shared CPU per call at %d sessions ÷ floor", sessions), Limit: 1.25, AtMost: true, Unit: "×"}
		mine, floor := r.Find("shared", "mcpgate-shared", sessions, 1024), r.Find("shared", "floor", sessions, 1024)
		if t.Value = ratio(mine, floor, cpu); t.Value == 0 {
			t.Absent = "no run of both"
		}
		ts = append(ts, t)
	}
	// OpenTelemetry on, every call traced, beside mcpgate as it ships.
	for _, sessions := range r.sessionsOf("telemetry") {
		t := Target{Name: fmt.Sprintf("mcpgate-otel CPU per call at %d sessions ÷ mcpgate", sessions), Limit: 1.25, AtMost: true, Unit: "×"}
		on, off := r.Find("telemetry", "mcpgate-otel", sessions, 1024), r.Find("telemetry", "mcpgate", sessions, 1024)
		if t.Value = ratio(on, off, cpu); t.Value == 0 {
			t.Absent = "no run of both"
		}
		ts = append(ts, t)
	}
	for _, peer := range r.Gateways {
		if peer == "floor" || peer == "mcpgate" || isBase(peer) { // the baseline build is no peer
			continue
		}
		ts = append(ts,
			rel("mcpgate throughput at 64 sessions ÷ "+peer, "mcpgate", peer, 64, thr, 5, false),
			rel(peer+" p50 at 1 session ÷ mcpgate", peer, "mcpgate", 1, p50, 2, false),
			rel(peer+" p99 at 64 sessions ÷ mcpgate", peer, "mcpgate", 64, p99, 4, false),
		)
	}
	rss := Target{Name: "mcpgated RSS with 10 idle backends", Limit: 30, AtMost: true, Unit: "MiB", Absent: "no start-up run with 10 backends"}
	ready := Target{Name: "READY=1 with 10 backends after the slowest handshake", Limit: 20, AtMost: true, Unit: "ms", Absent: rss.Absent}
	for _, s := range r.Startup {
		if s.Backends == 10 && s.Error == "" {
			rss.Value, rss.Absent = float64(s.RSSKiB)/1024, ""
			ready.Value, ready.Absent = s.OverMs, ""
		}
	}
	idle := Target{Name: "mcpgate memory per idle session", Limit: 3072, AtMost: true, Unit: "B", Absent: "no idle run"}
	for _, i := range r.Idle {
		if i.Gateway == "mcpgate" && i.Error == "" {
			idle.Value, idle.Absent = i.BytesPerSession, ""
			idle.Name = fmt.Sprintf("mcpgate RSS growth per idle session (%d sessions)", i.Idle)
		}
	}
	ts = append(ts, idle)
	for _, i := range r.IdleAtScale {
		if i.Gateway == "mcpgate" && i.Error == "" {
			ts = append(ts, Target{Name: fmt.Sprintf("mcpgate RSS growth per idle session (%d sessions)", i.Idle),
				Value: i.BytesPerSession, Limit: 3072, AtMost: true, Unit: "B"})
		}
	}
	if h := r.IdleHeap; h != nil {
		ts = append(ts, Target{Name: fmt.Sprintf("mcpgate live heap per idle session (%d sessions)", h.Sessions),
			Value: h.BytesPerSession, Limit: 4096, AtMost: true, Unit: "B"})
	}
	large := Target{Name: "mcpgate peak RSS ÷ size of the large result", Limit: 1.5, AtMost: true, Unit: "×", Absent: "no large-result run"}
	largeTime := Target{Name: "mcpgate time to pass the large result ÷ floor", Limit: 1.2, AtMost: true, Unit: "×", Absent: "no large-result run of both"}
	for _, l := range r.Large {
		for _, f := range r.Large {
			if l.Gateway == "mcpgate" && f.Gateway == "floor" && l.Error == "" && f.Error == "" && f.Seconds > 0 {
				largeTime.Value, largeTime.Absent = l.Seconds/f.Seconds, ""
			}
		}
		if l.Gateway == "mcpgate" {
			large.Name = fmt.Sprintf("mcpgate peak RSS ÷ size of the %s result", Size(l.Bytes))
			large.Value, large.Absent = l.PeakOverRes, ""
			if l.Error != "" {
				large.Absent = "it failed: " + l.Error
			}
		}
	}
	ts = append(ts, largeTime)
	for _, remote := range []struct{ gateway, over string }{{RemoteTCP, "TCP"}, {RemoteUnix, "a unix socket"}} {
		t := Target{Name: "mcpgate peak RSS ÷ size of the large result from a remote backend over " + remote.over, Limit: 1.5, AtMost: true, Unit: "×", Absent: "no run of " + remote.gateway}
		for _, l := range r.Large {
			if l.Gateway == remote.gateway {
				t.Name = fmt.Sprintf("mcpgate peak RSS ÷ size of the %s result from a remote backend over %s", Size(l.Bytes), remote.over)
				t.Value, t.Absent = l.PeakOverRes, ""
				if l.Error != "" {
					t.Absent = "it failed: " + l.Error
				}
			}
		}
		ts = append(ts, t)
	}
	// Validating an OAuth access token on every request, against a static
	// token, with as many sessions as the payload loads: the gateway's CPU
	// time per call, steadier on a shared machine than throughput.
	oauth := Target{Name: "mcpgate CPU per call with an OAuth JWT ÷ with a static token", Limit: 1.1, AtMost: true, Unit: "×", Absent: "no auth run"}
	for _, l := range r.Load {
		if l.Scenario != "auth" || l.Gateway != "mcpgate-oauth" || l.Result == nil || l.Sessions == 1 {
			continue
		}
		if st := r.Find("auth", "mcpgate-token", l.Sessions, l.Payload); st != nil && st.Result != nil && st.CPUPerCall > 0 {
			oauth.Name = fmt.Sprintf("mcpgate CPU per call with an OAuth JWT ÷ with a static token (%d sessions)", l.Sessions)
			oauth.Value, oauth.Absent = l.CPUPerCall/st.CPUPerCall, ""
		}
	}
	return append(append(ts, rss, large, ready, oauth), r.statelessTargets()...)
}

// statelessTargets compare mcpgate's CPU time per call of 2026-07-28
// stateless clients with that of 2025 sessions, measured in alternating
// rounds on the same process, at each number of clients.
func (r *Results) statelessTargets() []Target {
	var ts []Target
	for _, l := range r.Load {
		if l.Scenario != "stateless" || l.Gateway != "mcpgate-stateless" {
			continue
		}
		t := Target{Name: fmt.Sprintf("mcpgate CPU per call, stateless ÷ session (%d clients)", l.Sessions), Limit: 1.1, AtMost: true, Unit: "×"}
		s := r.Find("stateless", "mcpgate", l.Sessions, l.Payload)
		switch {
		case l.Result == nil || l.CPUPerCall == 0:
			t.Absent = "the stateless run " + cmpOr(l.Skipped, "made no call")
		case s == nil || s.Result == nil || s.CPUPerCall == 0:
			t.Absent = fmt.Sprintf("no %d-session run of mcpgate beside it", l.Sessions)
		default:
			t.Value = l.CPUPerCall / s.CPUPerCall
		}
		ts = append(ts, t)
	}
	return ts
}

func cmpOr(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
