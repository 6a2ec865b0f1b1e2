package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/bench/internal/gateways"
	"github.com/mcpgate/mcpgate/bench/internal/load"
	"github.com/mcpgate/mcpgate/bench/internal/report"
)

// profiled is mcpgate's profiling build running one configuration.
type profiled struct {
	*gateways.Running
	b      *bencher
	pprof  string // the address of its net/http/pprof
	prefix string
}

// startProfiled runs g's profiling build.
func (b *bencher) startProfiled(g *gateways.Gateway, prefix string) (*profiled, error) {
	port, err := gateways.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	r, err := gateways.Profiled(g, addr).Start(b.ctx, b.env, b.group, b.echo())
	if err != nil {
		return nil, err
	}
	return &profiled{Running: r, b: b, pprof: addr, prefix: prefix}, nil
}

func (p *profiled) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.pprof+path, nil)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// save writes the profile at path to PREFIX-mcpgate-NAME.pprof.
func (p *profiled) save(name, path string) error {
	fmt.Fprintf(os.Stderr, "  profile  %-12s %s\n", p.Name, name)
	ctx, cancel := context.WithTimeout(p.b.ctx, time.Minute)
	defer cancel()
	if strings.Contains(path, "gc=1") {
		// A memory profile is as of the last GC but one: a first
		// request with its GC makes the second complete.
		resp, err := p.get(ctx, path)
		if err != nil {
			return fmt.Errorf("profile %s: %w", name, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := p.get(ctx, path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", name, resp.Status)
	}
	out := p.prefix + "-mcpgate-" + name + ".pprof"
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return err
	}
	p.b.r.Profiles = append(p.b.r.Profiles, filepath.Base(out))
	return nil
}

// cpu profiles a load of sessions (or stateless clients) for the
// measured stretch.
func (p *profiled) cpu(name string, sessions int, stateless bool) error {
	b := p.b
	openLoad := load.OpenToken
	if stateless {
		openLoad = load.OpenStateless
	}
	open, err := openLoad(b.ctx, p.URL, sessions, strings.Repeat("x", 1024), p.Token)
	if err != nil {
		return err
	}
	defer load.CloseAll(open)
	done := make(chan load.Tally, 1)
	go func() { done <- load.Drive(b.ctx, open, load.Spec{Duration: b.plan.measure + time.Second}) }()
	secs := int(b.plan.measure.Seconds() + 0.5)
	err = p.save(name, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(secs, 1)))
	t := <-done
	if err == nil && t.Errors > 0 {
		err = fmt.Errorf("%s: %d calls failed: %s", name, t.Errors, t.FirstError)
	}
	return err
}

// profileScenario runs mcpgate's profiling build under the loads of the
// targets and saves its pprof profiles next to the results, named
// PREFIX-mcpgate-NAME.pprof: allocations of the large result, the heap
// with the idle sessions open, CPU with 1 and with 64 sessions, with 64
// stateless clients and with 64 sessions of the shared host's
// configuration.
func (b *bencher) profileScenario(prefix string) error {
	// The shared host runs alone first, so that its profile holds its
	// own calls only.
	shared, err := b.startProfiled(sharedHost(), prefix)
	if err != nil {
		return err
	}
	err = shared.cpu("cpu-64-shared", 64, false)
	b.group.Stop(shared.Proc)
	if err != nil {
		return err
	}
	g, err := b.startProfiled(gateways.All()[1], prefix)
	if err != nil {
		return err
	}
	defer b.group.Stop(g.Proc)
	// The large result comes first: the allocations it shows are then
	// the result's alone.
	s := load.NewSession(g.URL, "")
	if err := s.Initialize(b.ctx); err != nil {
		return err
	}
	err = s.Call(b.ctx, b.plan.large)
	s.Close()
	if err != nil {
		return fmt.Errorf("large result: %w", err)
	}
	if err := g.save("allocs-large-result", "/debug/pprof/allocs?gc=1"); err != nil {
		return err
	}
	// The idle sessions come before the CPU loads, whose garbage and
	// streams would otherwise be released between its two measurements.
	if err := g.idleHeap(); err != nil {
		return err
	}
	if err := g.cpu("cpu-1-session", 1, false); err != nil {
		return err
	}
	if err := g.cpu("cpu-64-sessions", 64, false); err != nil {
		return err
	}
	return g.cpu("cpu-64-stateless", 64, true)
}

// idleHeap measures the live heap before and after opening the idle
// sessions, each after a GC: what an idle session keeps, exactly. It
// saves the heap profile with them open, then closes them.
func (g *profiled) idleHeap() error {
	b := g.b
	heapAlloc := func() (int64, error) {
		var n int64
		for range 2 { // the second GC also frees what the first finalized
			resp, err := g.get(b.ctx, "/debug/pprof/heap?gc=1&debug=1")
			if err != nil {
				return 0, err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return 0, err
			}
			_, after, ok := strings.Cut(string(body), "\n# HeapAlloc = ")
			if !ok {
				return 0, errors.New("no HeapAlloc in the heap profile")
			}
			n, _ = strconv.ParseInt(strings.Fields(after)[0], 10, 64)
		}
		return n, nil
	}
	conns := load.Client(idleConns)
	defer conns.CloseIdleConnections()
	before, err := heapAlloc()
	if err != nil {
		return err
	}
	idle, err := load.OpenShared(b.ctx, g.URL, b.plan.idle, conns)
	if err != nil {
		return err
	}
	defer load.CloseAll(idle)
	after, err := heapAlloc()
	if err != nil {
		return err
	}
	b.r.IdleHeap = &report.IdleHeap{Sessions: b.plan.idle, BeforeBytes: before, AfterBytes: after,
		BytesPerSession: float64(after-before) / float64(b.plan.idle)}
	return g.save("heap-idle-sessions", "/debug/pprof/heap?gc=1")
}
