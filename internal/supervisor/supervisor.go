// Package supervisor runs the configured set of backends: it starts them in
// parallel, reports when all have settled, applies reloaded configuration
// and shuts them all down.
package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
)

// Options configure a Supervisor.
type Options struct {
	// BackendOptions returns the options for a backend about to be created.
	BackendOptions func(cfg *config.Backend) backend.Options
	// OnAdd and OnRemove, if set, are called when reload adds or removes a
	// backend (not when it replaces one with a changed configuration).
	OnAdd, OnRemove func(name string)
	// OnRemoved, if set, is called once a backend stopped for good, e.g. to
	// release what BackendOptions allocated for it.
	OnRemoved func(b *backend.Backend)
	Logger    *slog.Logger
}

// Supervisor owns the backends.
type Supervisor struct {
	opts Options
	log  *slog.Logger
	ctx  context.Context // parent of every backend's Run

	mu      sync.Mutex // serialises Start, Apply and Shutdown
	running map[string]*running
	sorted  atomic.Pointer[[]*backend.Backend]
}

type running struct {
	b      *backend.Backend
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a supervisor whose backends live until ctx ends or Shutdown.
func New(ctx context.Context, opts Options) *Supervisor {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Supervisor{opts: opts, log: opts.Logger, ctx: ctx, running: map[string]*running{}}
	s.sorted.Store(&[]*backend.Backend{})
	return s
}

// Backends returns every configured backend, sorted by name.
func (s *Supervisor) Backends() []*backend.Backend { return *s.sorted.Load() }

// Backend returns the backend with the given name, or nil.
func (s *Supervisor) Backend(name string) *backend.Backend {
	list := s.Backends()
	i, found := slices.BinarySearchFunc(list, name, func(b *backend.Backend, n string) int { return strings.Compare(b.Name(), n) })
	if !found {
		return nil
	}
	return list[i]
}

// Start starts every backend of cfg in parallel.
func (s *Supervisor) Start(cfg *config.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bc := range cfg.Backends {
		s.launch(bc)
	}
	s.publish()
}

// launch starts one backend; s.mu must be held.
func (s *Supervisor) launch(bc *config.Backend) {
	b := backend.New(bc, s.opts.BackendOptions(bc))
	ctx, cancel := context.WithCancel(s.ctx)
	r := &running{b: b, cancel: cancel, done: make(chan struct{})}
	s.running[bc.Name] = r
	go func() {
		defer close(r.done)
		b.Run(ctx)
		if s.opts.OnRemoved != nil {
			s.opts.OnRemoved(b)
		}
	}()
}

func (s *Supervisor) publish() {
	list := make([]*backend.Backend, 0, len(s.running))
	for _, r := range s.running {
		list = append(list, r.b)
	}
	slices.SortFunc(list, func(a, b *backend.Backend) int { return strings.Compare(a.Name(), b.Name()) })
	s.sorted.Store(&list)
}

// WaitSettled waits until every given backend has settled (see
// backend.Settled), or ctx ends.
func WaitSettled(ctx context.Context, backends []*backend.Backend) error {
	for _, b := range backends {
		select {
		case <-b.Settled():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Change is what Apply did.
type Change struct {
	Added, Removed, Restarted, Unchanged []string
}

func (c Change) String() string {
	parts := []string{}
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", c.Added}, {"removed", c.Removed}, {"restarted", c.Restarted}, {"unchanged", c.Unchanged}} {
		if len(p.names) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", p.what, strings.Join(p.names, ", ")))
		}
	}
	if len(parts) == 0 {
		return "no backends"
	}
	return strings.Join(parts, "; ")
}

// Apply moves the running set to cfg: backends that are new start, removed
// ones stop, ones whose configuration changed restart, and the others are
// left alone, children, sessions and all. It returns once the removed and
// changed ones have stopped and the new ones are started, or ctx ended. It
// does not wait for the new ones' handshakes: as at start-up, each joins
// when its handshake ends (its Settled channel says when), so a new backend
// that hangs in its handshake holds up nothing.
//
// Apply works in two steps so that nothing new is reachable under the old
// rules: first the removed and changed backends leave the published set
// (they stop in the background) and restrict runs, with only the unchanged
// backends published; then the changed backends' successors and the added
// ones start. restrict, if not nil, is where the caller switches whatever
// decides who may use the backends (clients and their policies): it runs
// before any new backend exists, and before Apply waits for anything.
func (s *Supervisor) Apply(ctx context.Context, cfg *config.Config, restrict func()) (Change, error) {
	s.mu.Lock()
	var ch Change
	var stopping []*running
	replaced := map[string]*running{}
	for name, r := range s.running {
		bc, keep := cfg.Backends[name]
		switch {
		case !keep:
			ch.Removed = append(ch.Removed, name)
		case !r.b.Config().Equal(bc):
			ch.Restarted = append(ch.Restarted, name)
			replaced[name] = r
		default:
			ch.Unchanged = append(ch.Unchanged, name)
			continue
		}
		stopping = append(stopping, r)
		delete(s.running, name)
		r.cancel()
	}
	s.publish()
	if restrict != nil {
		restrict()
	}
	for name, bc := range cfg.Backends {
		if _, exists := s.running[name]; exists {
			continue
		}
		if old := replaced[name]; old != nil {
			// A changed backend stops before its successor starts: they
			// may share ports, files or locks.
			<-old.done
		} else {
			ch.Added = append(ch.Added, name)
		}
		s.launch(bc)
	}
	s.publish()
	s.mu.Unlock()
	for _, list := range [][]string{ch.Added, ch.Removed, ch.Restarted, ch.Unchanged} {
		slices.Sort(list)
	}
	for _, name := range ch.Removed {
		if s.opts.OnRemove != nil {
			s.opts.OnRemove(name)
		}
	}
	for _, name := range ch.Added {
		if s.opts.OnAdd != nil {
			s.opts.OnAdd(name)
		}
	}
	for _, r := range stopping {
		select {
		case <-r.done:
		case <-ctx.Done():
			return ch, ctx.Err()
		}
	}
	return ch, nil
}

// Shutdown stops every backend, in parallel, each the graceful way, and
// returns when all children are gone.
func (s *Supervisor) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.running {
		r.cancel()
	}
	for _, r := range s.running {
		<-r.done
	}
}

// StatusLine summarises the backends in one line, as for systemd's STATUS=:
// "5/6 backends healthy, 42 tools; github restarting (2/5)", with the
// number of unhealthy ones when there are any: "4/6 backends healthy,
// 1 unhealthy, 42 tools; …". Backends idle until their first call (start =
// "on-demand", idle_stop) are counted on their own: "2/2 backends healthy,
// 3 idle on demand, 42 tools".
func StatusLine(backends []*backend.Backend, tools int) string {
	healthy, unhealthy, total, idle := 0, 0, 0, 0
	var notes []string
	for _, b := range backends {
		st := b.Status()
		cfg := b.Config()
		if !cfg.Enabled && st.State == backend.Stopped {
			continue // disabled in the configuration: not expected to run
		}
		if st.State == backend.Idle {
			idle++
			continue
		}
		total++
		switch {
		case st.State == backend.Healthy:
			healthy++
		case st.State == backend.Starting && st.Retrying:
			notes = append(notes, fmt.Sprintf("%s restarting (%d/%d)", b.Name(), st.InWindow, cfg.MaxRestarts))
		case st.State == backend.Unhealthy:
			unhealthy++
			note := b.Name() + " unhealthy"
			if !b.Health().CircuitOpen.IsZero() {
				note += " (circuit open)"
			}
			notes = append(notes, note)
		default:
			notes = append(notes, b.Name()+" "+st.State.String())
		}
	}
	line := fmt.Sprintf("%d/%d backends healthy, %d tools", healthy, total, tools)
	if total == 1 {
		line = fmt.Sprintf("%d/%d backend healthy, %d tools", healthy, total, tools)
	}
	if tools == 1 {
		line = strings.TrimSuffix(line, "s")
	}
	if unhealthy > 0 {
		head, tail, _ := strings.Cut(line, ", ")
		line = fmt.Sprintf("%s, %d unhealthy, %s", head, unhealthy, tail)
	}
	if idle > 0 {
		i := strings.LastIndex(line, ", ") // before the tools
		line = fmt.Sprintf("%s, %d idle on demand%s", line[:i], idle, line[i:])
	}
	if len(notes) > 0 {
		line += "; " + strings.Join(notes, ", ")
	}
	return line
}
