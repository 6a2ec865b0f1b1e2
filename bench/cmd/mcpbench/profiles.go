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

// profileScenario runs mcpgate's profiling build under the loads of the
// targets and saves its pprof profiles next to the results, named
// PREFIX-mcpgate-NAME.pprof: allocations of the large result, CPU with 1
// and with 64 sessions and with 64 stateless clients, and the heap with
// the idle sessions open.
func (b *bencher) profileScenario(prefix string) error {
	port, err := gateways.FreePort()
	if err != nil {
		return err
	}
	pprof := fmt.Sprintf("127.0.0.1:%d", port)
	g, err := gateways.Profiled(pprof).Start(b.ctx, b.env, b.group, b.echo())
	if err != nil {
		return err
	}
	defer b.group.Stop(g.Proc)
	get := func(ctx context.Context, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprof+path, nil)
		if err != nil {
			return nil, err
		}
		return http.DefaultClient.Do(req)
	}
	save := func(name, path string) error {
		fmt.Fprintf(os.Stderr, "  profile  mcpgate      %s\n", name)
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		if strings.Contains(path, "gc=1") {
			// A memory profile is as of the last GC but one: a first
			// request with its GC makes the second complete.
			resp, err := get(ctx, path)
			if err != nil {
				return fmt.Errorf("profile %s: %w", name, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		resp, err := get(ctx, path)
		if err != nil {
			return fmt.Errorf("profile %s: %w", name, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("profile %s: %s", name, resp.Status)
		}
		out := prefix + "-mcpgate-" + name + ".pprof"
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			return err
		}
		b.r.Profiles = append(b.r.Profiles, filepath.Base(out))
		return nil
	}
	// cpu profiles the load of sessions (or stateless clients) for the
	// measured stretch.
	cpu := func(name string, sessions int, stateless bool) error {
		openLoad := load.OpenToken
		if stateless {
			openLoad = load.OpenStateless
		}
		open, err := openLoad(b.ctx, g.URL, sessions, strings.Repeat("x", 1024), "")
		if err != nil {
			return err
		}
		defer load.CloseAll(open)
		done := make(chan load.Tally, 1)
		go func() { done <- load.Drive(b.ctx, open, load.Spec{Duration: b.plan.measure + time.Second}) }()
		secs := int(b.plan.measure.Seconds() + 0.5)
		err = save(name, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(secs, 1)))
		t := <-done
		if err == nil && t.Errors > 0 {
			err = fmt.Errorf("%s: %d calls failed: %s", name, t.Errors, t.FirstError)
		}
		return err
	}
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
	if err := save("allocs-large-result", "/debug/pprof/allocs?gc=1"); err != nil {
		return err
	}
	if err := cpu("cpu-1-session", 1, false); err != nil {
		return err
	}
	if err := cpu("cpu-64-sessions", 64, false); err != nil {
		return err
	}
	if err := cpu("cpu-64-stateless", 64, true); err != nil {
		return err
	}
	// The live heap before and after opening the idle sessions, each
	// after a GC, is what an idle session keeps, exactly.
	heapAlloc := func() (int64, error) {
		var n int64
		for range 2 { // the second GC also frees what the first finalized
			resp, err := get(b.ctx, "/debug/pprof/heap?gc=1&debug=1")
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
	shared := load.Client(idleConns)
	defer shared.CloseIdleConnections()
	before, err := heapAlloc()
	if err != nil {
		return err
	}
	idle, err := load.OpenShared(b.ctx, g.URL, b.plan.idle, shared)
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
	return save("heap-idle-sessions", "/debug/pprof/heap?gc=1")
}
