package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/bench/internal/gateways"
	"github.com/mcpgate/mcpgate/bench/internal/load"
	"github.com/mcpgate/mcpgate/bench/internal/proc"
	"github.com/mcpgate/mcpgate/bench/internal/report"
)

// plan is the size of each scenario.
type plan struct {
	warmup, measure time.Duration
	sessions        []int // at 1 KiB
	stateless       []int // mcpgate with sessions and 2026-07-28 clients, at 1 KiB
	payloads        []int // at payloadSessions sessions
	payloadSessions int
	large           int // bytes of the one large result
	idle, busy      int
	idleAtScale     int // idle sessions of the floor and mcpgate alone
	demoSessions    int
	rounds          int   // the measured time of a load is cut into this many rounds
	startup         []int // numbers of backends
	startupRepeats  int
}

func planFor(quick bool) plan {
	if quick {
		return plan{
			warmup: 200 * time.Millisecond, measure: 500 * time.Millisecond,
			sessions: []int{1, 16}, stateless: []int{1, 16}, payloads: []int{64 << 10}, payloadSessions: 4,
			large: 5_000_000, idle: 50, busy: 4, idleAtScale: 200, demoSessions: 4,
			rounds: 1, startup: []int{10}, startupRepeats: 1,
		}
	}
	return plan{
		warmup: time.Second, measure: 3 * time.Second,
		sessions: []int{1, 16, 64, 256}, stateless: []int{1, 64}, payloads: []int{64 << 10, 1 << 20}, payloadSessions: 16,
		large: 50_000_000, idle: 1000, busy: 16, idleAtScale: 20_000, demoSessions: 16,
		rounds: 3, startup: []int{10, 100}, startupRepeats: 3,
	}
}

// bencher runs the scenarios and collects their results.
type bencher struct {
	ctx   context.Context
	env   *gateways.Env
	group *proc.Group
	plan  plan
	r     *report.Results
	// baseline is another build of mcpgated that runs beside this one
	// (see all); "" for none.
	baseline string
}

// all returns the gateways the scenarios compare: gateways.All, or with a
// baseline build the floor, mcpgate and the baseline build configured as
// mcpgate is. An A/B of two builds needs no Node peers, and without them
// its loads take half the time.
func (b *bencher) all() []*gateways.Gateway {
	all := gateways.All()
	if b.baseline == "" {
		return all
	}
	return []*gateways.Gateway{all[0], all[1], b.base(all[1])}
}

// base returns g, one of mcpgate's configurations, as the baseline build
// runs it.
func (b *bencher) base(g *gateways.Gateway) *gateways.Gateway {
	return gateways.Built(g, report.BaseName(g.Name), b.baseline)
}

func (b *bencher) echo() []string { return []string{filepath.Join(b.env.Bin, "benchecho")} }

// startAll starts every gateway in front of backend; they run side by
// side, idle while another is measured.
func (b *bencher) startAll(backend []string) ([]*gateways.Running, func(), error) {
	return b.startEach(b.all(), backend)
}

// startEach starts each of gws in front of backend, and returns them and
// the function that stops them; on an error, those started are stopped.
func (b *bencher) startEach(gws []*gateways.Gateway, backend []string) ([]*gateways.Running, func(), error) {
	var running []*gateways.Running
	stop := func() {
		for _, g := range running {
			b.group.Stop(g.Proc)
		}
	}
	for _, g := range gws {
		rg, err := g.Start(b.ctx, b.env, b.group, backend)
		if err != nil {
			stop()
			return nil, nil, err
		}
		running = append(running, rg)
	}
	return running, stop, nil
}

// largeScenario sends the large result through each gateway, each freshly
// started (so that its peak RSS is the result's) and stopped after it (so
// that a gateway the result wedges does not fail the other scenarios).
func (b *bencher) largeScenario() error {
	for _, g := range b.all() {
		rg, err := g.Start(b.ctx, b.env, b.group, b.echo())
		if err != nil {
			return err
		}
		b.r.Large = append(b.r.Large, b.large(rg))
		b.group.Stop(rg.Proc)
	}
	if b.baseline != "" {
		return nil
	}
	// mcpgate in front of the same backend as a remote server, over TCP
	// and on a unix socket: rows of their own.
	port, err := gateways.FreePort()
	if err != nil {
		return err
	}
	socket := filepath.Join(b.env.Work, "benchecho.sock")
	for _, remote := range []struct{ name, flag, where, url string }{
		{report.RemoteTCP, "-http", fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d/mcp", port)},
		{report.RemoteUnix, "-unix", socket, "unix:" + socket + ":/mcp"},
	} {
		be, err := b.group.Start("benchecho "+remote.flag, append(b.echo(), remote.flag, remote.where), nil, b.env.Log)
		if err != nil {
			return err
		}
		rg, err := gateways.MCPGateRemote(remote.name, remote.url).Start(b.ctx, b.env, b.group, nil)
		if err != nil {
			b.group.Stop(be)
			return err
		}
		b.r.Large = append(b.r.Large, b.large(rg))
		b.group.Stop(rg.Proc)
		b.group.Stop(be)
	}
	return nil
}

// loadScenarios runs the session and payload loads on every gateway.
func (b *bencher) loadScenarios() error {
	running, stop, err := b.startAll(b.echo())
	if err != nil {
		return err
	}
	defer stop()
	for _, n := range b.plan.sessions {
		b.loadRuns("sessions", "benchecho", running, n, 1024)
	}
	for _, n := range b.plan.stateless {
		b.loadRuns("stateless", "benchecho", statelessPair(running), n, 1024)
	}
	for _, size := range b.plan.payloads {
		b.loadRuns("payload", "benchecho", running, b.plan.payloadSessions, size)
	}
	return nil
}

// loadRuns measures one load on every gateway. The sessions of all
// gateways are opened first; the measured time is then cut into rounds
// that visit the gateways in turn, so that a burst of noise on a shared
// machine falls on all of them rather than on one.
func (b *bencher) loadRuns(scenario, backend string, running []*gateways.Running, sessions, payload int) {
	type state struct {
		g     *gateways.Running
		open  []*load.Session
		tally load.Tally
		cpu   time.Duration // the gateway's CPU time while driven
		round []float64     // CPU µs per call in each round
		err   string
	}
	var states []*state
	defer func() {
		for _, st := range states {
			load.CloseAll(st.open)
		}
	}()
	for _, g := range running {
		fmt.Fprintf(os.Stderr, "  %-8s %-10s %-12s sessions=%-4d payload=%d\n", scenario, backend, g.Name, sessions, payload)
		st := &state{g: g, tally: load.Tally{Sessions: sessions, Payload: payload}}
		openLoad := load.OpenToken
		if strings.HasSuffix(g.Name, report.StatelessSuffix) {
			openLoad = load.OpenStateless
		}
		open, err := openLoad(b.ctx, g.URL, sessions, strings.Repeat("x", payload), g.Token)
		if err != nil {
			st.err = "failed: " + err.Error()
		}
		st.open = open
		states = append(states, st)
	}
	for round := range b.plan.rounds {
		warmup := b.plan.warmup
		if round > 0 {
			warmup = b.plan.warmup / 5
		}
		// Each round starts with the next gateway, so that none is always
		// measured right after the same other: which one comes first
		// moves CPU per call by up to 10% on this kind of machine.
		for i := range states {
			st := states[(i+round)%len(states)]
			if st.open != nil {
				cpu0, err0 := proc.CPUTime(st.g.Proc.PID)
				t := load.Drive(b.ctx, st.open, load.Spec{Warmup: warmup, Duration: b.plan.measure / time.Duration(b.plan.rounds)})
				cpu1, err1 := proc.CPUTime(st.g.Proc.PID)
				st.tally.Add(t)
				if err0 == nil && err1 == nil {
					st.cpu += cpu1 - cpu0
					if made := t.Made(); made > 0 {
						st.round = append(st.round, float64((cpu1-cpu0).Microseconds())/float64(made))
					}
				}
			}
		}
	}
	for _, st := range states {
		lr := report.LoadRun{Scenario: scenario, Backend: backend, Gateway: st.g.Name, Sessions: sessions, Payload: payload, Skipped: st.err}
		if st.open != nil {
			res := st.tally.Result()
			lr.Result = &res
			if made := st.tally.Made(); made > 0 {
				lr.CPUPerCall = float64(st.cpu.Microseconds()) / float64(made)
			}
			if len(st.round) == b.plan.rounds {
				lr.RoundCPU = st.round
			}
			if res.Calls == 0 && res.Errors > 0 {
				lr.Skipped = "every call failed: " + res.FirstError
			}
			// Measured while the sessions are open: a gateway may hold a
			// process per session.
			if m, err := proc.Mem(st.g.Proc.PID); err == nil {
				lr.RSSKiB = m.RSS
			}
			lr.Processes = len(proc.Tree(st.g.Proc.PID))
		}
		b.r.Load = append(b.r.Load, lr)
	}
}

// largeTimeout bounds the large call: mcpgate and the floor take well
// under a second, and a gateway that takes longer fails the scenario.
const largeTimeout = 15 * time.Second

// large sends one tools/call whose result is plan.large bytes.
func (b *bencher) large(g *gateways.Running) report.LargeRun {
	lr := report.LargeRun{Gateway: g.Name, Bytes: b.plan.large}
	fmt.Fprintf(os.Stderr, "  large    %-12s %d bytes\n", g.Name, b.plan.large)
	if m, err := proc.Mem(g.Proc.PID); err == nil {
		lr.BaseRSSKiB = m.RSS
	}
	s := load.NewSession(g.URL, "")
	defer s.Close()
	ctx, cancel := context.WithTimeout(b.ctx, largeTimeout)
	defer cancel()
	err := s.Initialize(ctx)
	if err == nil {
		t0 := time.Now()
		err = s.Call(ctx, b.plan.large)
		lr.Seconds = time.Since(t0).Seconds()
	}
	if err != nil {
		lr.Error = err.Error()
	}
	if m, err := proc.Mem(g.Proc.PID); err == nil {
		lr.PeakRSSKiB = m.Peak
		lr.PeakOverRes = float64(m.Peak*1024) / float64(b.plan.large)
	}
	return lr
}

// idleScenario opens many sessions that then stay idle, on fresh
// gateways, and measures what each costs and how busy sessions fare
// beside them.
func (b *bencher) idleScenario() error {
	running, stop, err := b.startAll(b.echo())
	if err != nil {
		return err
	}
	for _, g := range running {
		b.r.Idle = append(b.r.Idle, b.idle(g))
	}
	stop()
	// At scale, the warm-up of a freshly started gateway is spread over
	// so many sessions that what RSS grows by is what they keep: the
	// floor and mcpgate, each freshly started, alone, without busy
	// sessions.
	for _, g := range gateways.All()[:2] {
		rg, err := g.Start(b.ctx, b.env, b.group, b.echo())
		if err != nil {
			return err
		}
		ir := report.IdleRun{Gateway: g.Name, Idle: b.plan.idleAtScale}
		fmt.Fprintf(os.Stderr, "  idle     %-12s %d idle\n", g.Name, ir.Idle)
		closeIdle := b.openIdle(rg, &ir)
		closeIdle()
		b.group.Stop(rg.Proc)
		b.r.IdleAtScale = append(b.r.IdleAtScale, ir)
	}
	return nil
}

// idleConns is how many connections the idle sessions share.
const idleConns = 8

// idle measures what b.plan.idle idle sessions add to g's RSS, once g
// has served the busy sessions' calls for the warm-up, then how the busy
// sessions fare beside them. Before the warm-up, RSS would grow by what a
// fresh Go program's first requests cost it, whoever handles them: its
// heap grows to the collector's 4 MiB minimum goal, and its first
// collection allocates about 1.5 MiB of metadata. With a thousand
// sessions, that is more than they keep, the floor's as much as mcpgate's.
func (b *bencher) idle(g *gateways.Running) report.IdleRun {
	ir := report.IdleRun{Gateway: g.Name, Idle: b.plan.idle}
	fmt.Fprintf(os.Stderr, "  idle     %-12s %d idle, %d busy\n", g.Name, b.plan.idle, b.plan.busy)
	spec := load.Spec{Sessions: b.plan.busy, Payload: 1024, Duration: b.plan.warmup}
	if _, err := load.Run(b.ctx, g.URL, spec); err != nil {
		ir.Error = "warm-up: " + err.Error()
		return ir
	}
	defer b.openIdle(g, &ir)()
	if ir.Error != "" {
		return ir
	}
	spec.Warmup, spec.Duration = b.plan.warmup, b.plan.measure
	res, err := load.Run(b.ctx, g.URL, spec)
	if err != nil {
		ir.Error = err.Error()
		return ir
	}
	ir.Busy = &res
	return ir
}

// openIdle opens ir.Idle sessions on g, sharing idleConns connections,
// and records g's RSS growth per session in ir (or its error). The
// sessions stay open until the function it returns is called.
func (b *bencher) openIdle(g *gateways.Running, ir *report.IdleRun) (closeIdle func()) {
	shared := load.Client(idleConns)
	before, _, err := proc.TreeRSS(g.Proc.PID)
	if err != nil {
		ir.Error = err.Error()
		return shared.CloseIdleConnections
	}
	idle, err := load.OpenShared(b.ctx, g.URL, ir.Idle, shared)
	closeIdle = func() {
		load.CloseAll(idle)
		shared.CloseIdleConnections()
	}
	if err != nil {
		ir.Error = err.Error()
		return closeIdle
	}
	after, n, err := proc.TreeRSS(g.Proc.PID)
	if err != nil {
		ir.Error = err.Error()
		return closeIdle
	}
	ir.RSSBeforeKiB, ir.RSSAfterKiB, ir.Processes = before, after, n
	ir.BytesPerSession = float64((after-before)*1024) / float64(ir.Idle)
	return closeIdle
}

// demoScenario puts the demo server behind every gateway: a realistic
// backend that decodes and encodes JSON.
func (b *bencher) demoScenario() error {
	running, stop, err := b.startAll([]string{filepath.Join(b.env.Bin, "mcpgate-demoserver")})
	if err != nil {
		return err
	}
	defer stop()
	b.loadRuns("demo", "demoserver", running, b.plan.demoSessions, 1024)
	return nil
}

// statelessPair returns mcpgate twice, driven by sessions and by stateless
// clients, and so the baseline build if it runs: in one loadRuns their
// rounds alternate, so that noise on a shared machine falls on both sides
// of the comparison.
func statelessPair(running []*gateways.Running) []*gateways.Running {
	var out []*gateways.Running
	for _, g := range running {
		if g.Name == "mcpgate" || g.Name == report.BaseName("mcpgate") {
			variant := *g.Gateway
			variant.Name += report.StatelessSuffix
			out = append(out, g, &gateways.Running{Gateway: &variant, URL: g.URL, Proc: g.Proc})
		}
	}
	return out
}
