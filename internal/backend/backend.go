// Package backend runs one MCP server as a supervised child process and
// speaks MCP to it over stdin and stdout.
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
	"github.com/mcpgate/mcpgate/internal/unitrun"
)

// State is a backend's public state.
type State int

// The states a backend can be in.
const (
	Starting  State = iota // spawning, in its handshake, or waiting to restart
	Healthy                // handshake done, serving calls
	Unhealthy              // running, but a call timed out and it is being probed
	Stopped                // not running, by configuration or operator
	Failed                 // gave up after too many restarts
	Idle                   // not running; starts on its first call (start = "on-demand", idle_stop)
)

var stateNames = [...]string{"starting", "healthy", "unhealthy", "stopped", "failed", "idle"}

func (s State) String() string { return stateNames[s] }

// Status is a snapshot of a backend.
type Status struct {
	Name      string
	State     State
	PID       int    // 0 when no child runs, and for a remote backend
	URL       string // a remote backend's URL as shown (DisplayURL); "" for a child
	Restarts  int    // automatic restarts since the daemon or the operator last started it
	InWindow  int    // crashes within the restart window, as counted against MaxRestarts
	Retrying  bool   // waiting to restart after a crash
	LastExit  ExitInfo
	LastError string
	Since     time.Time // when State last changed
	Server    *ServerInfo

	// LastError is why it last failed, in detail, for the journal and its
	// readers; Cause is the same as clients may learn it: a short phrase
	// of a fixed vocabulary (see Cause), never a server's own words.
	Cause string
}

// Options are what a backend needs besides its configuration.
type Options struct {
	Version         string        // the gateway's version, sent as clientInfo.version
	GracePeriod     time.Duration // per step of a graceful shutdown
	MaxMessageBytes int64         // longest line accepted from the child
	Env             []string      // the daemon's environment; the child gets MinimalEnv of it
	// CredentialsDirectory is where ${credential:NAME} is read.
	CredentialsDirectory string
	Handler              Handler  // receives the child's notifications and requests
	Stderr               LineSink // receives the child's stderr lines; may be nil
	Logger               *slog.Logger
	// OnChange is called after every change of Status or Lists, never with
	// a lock held. It must not block for long.
	OnChange func(*Backend)
	// Units waits for requires_units; nil makes such backends fail to start.
	Units UnitWaiter
	// UnitRunner starts the servers of backends with runner = "unit"; nil
	// makes such backends fail to start.
	UnitRunner *unitrun.Runner
	// Cgroups, if set, is the daemon's delegated cgroup: each child of a
	// backend with runner = "process" gets a sub-cgroup of its own there,
	// with the backend's limits. Without it a backend with limits fails to
	// start.
	Cgroups *cgroup.Tree
	// PrerequisiteStderr receives the output lines of the backend's
	// prerequisite process; may be nil.
	PrerequisiteStderr LineSink
	// OnCalls, if set, is called when Health's call counts or last check
	// changed; it runs on the call path and must be cheap.
	OnCalls func(*Backend)
	// OnCall, if set, is called once per call with its outcome ("ok",
	// "error" or "refused") and how long it took.
	OnCall func(b *Backend, outcome string, d time.Duration)
	// CatalogCache, if set, is the file where the backend keeps the catalog
	// of its last handshake, for start = "on-demand" and idle_stop.
	CatalogCache string
	// InUse, if set, reports whether clients hold something on the backend
	// besides calls (subscriptions), which keeps idle_stop from stopping it.
	InUse func(*Backend) bool
	// Instance is this backend's number within its pool (instance =
	// "session"), from 1; 0 for a backend that is not an instance.
	Instance int
	// InstanceOptions returns the options of a pool's instance number n.
	InstanceOptions func(n int) Options
	// Release, if set, is called once an instance's Run returned, to free
	// what InstanceOptions allocated for it.
	Release func()
	// Spawn, if set, starts the backend's processes (see Spawner); nil
	// starts them on whatever thread the call runs on.
	Spawn Spawner
	// Adopt, if set, is a running server the previous mcpgated handed
	// across its re-exec (see Adopt): Run takes it over instead of
	// starting one, without a new handshake.
	Adopt *Adopted
	// Telemetry, if set, continues the trace of each call in the headers
	// of its HTTP requests to a remote server, traces OAuth token
	// requests, and measures sessions with the server. Nil is off.
	Telemetry *telemetry.Telemetry
}

// Backend is one configured MCP server. Run supervises it: spawns it,
// restarts it after crashes and stops it on command.
type Backend struct {
	name   string
	cfg    *config.Backend
	opts   Options
	log    *slog.Logger
	stderr *ring
	cmds   chan command

	misbehaved *journal.Limiter // warnings a server's output causes; see warnServer
	skipProbe  atomic.Bool      // the last child ended during server/discover

	mu   sync.Mutex
	st   Status
	conn *Conn
	// hot is st.State and conn as of their last change, published under mu
	// by publishLocked: what every call reads (Admit, Wake, Conn) takes no
	// lock of the backend's.
	hot   atomic.Pointer[hotState]
	lists atomic.Pointer[Lists]

	settled     chan struct{} // closed when the first start attempt is decided
	settledOnce sync.Once
	began       atomic.Int64 // when Run began, unix ns; 0 before

	mon        monitor     // health checks, circuit breaker, call counts
	lim        *limiter    // max_concurrent_calls and rate_limit
	graceUntil time.Time   // a restarting backend stays listed until then; guarded by mu
	graceTimer *time.Timer // drops it from the catalog when the grace ends; guarded by mu

	cliRuns       atomic.Int64          // numbers the cgroups of a cli backend's calls
	restartsTotal atomic.Uint64         // automatic restarts, never reset
	served        atomic.Pointer[Lists] // the lists it last served; see Served

	lc lifecycle

	tokens   tokenHolder    // a remote backend's own OAuth token; see remote_oauth.go
	upstream upstreamCounts // its calls by who they ran as upstream; see caller.go
}

type op int

const (
	opStart op = iota
	opStop
	opRestart
	opDemand // a call wants the backend running (start = "on-demand")
	opDetach // hand the running server to the next mcpgated (see Detach)
)

type command struct {
	op   op
	done chan error
	out  **Detached // opDetach's result, set before done
}

// Command errors.
var (
	// ErrStopped is returned for calls to a backend that is not running.
	ErrStopped = errors.New("backend is not running")
	// ErrShutdown is returned for commands sent while the daemon shuts down.
	ErrShutdown = errors.New("gateway is shutting down")
)

// New returns a backend for cfg. Nothing runs until Run is called.
func New(cfg *config.Backend, opts Options) *Backend {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Stderr == nil {
		opts.Stderr = logSink{opts.Logger.With("backend", cfg.Name)}
	}
	log := opts.Logger.With("backend", cfg.Name)
	if opts.Instance > 0 {
		log = log.With("instance", opts.Instance)
	}
	b := &Backend{
		name:    cfg.Name,
		cfg:     cfg,
		opts:    opts,
		log:     log,
		stderr:  newRing(),
		cmds:    make(chan command),
		settled: make(chan struct{}),
		lim:     newLimiter(cfg.Calls),

		misbehaved: newMisbehavedLimiter(),
	}
	b.st = Status{Name: cfg.Name, State: Stopped, Since: time.Now()}
	if cfg.IsRemote() {
		b.st.URL = DisplayURL(cfg)
	}
	b.publishLocked()
	b.lists.Store(&Lists{})
	if cfg.Pooled() && opts.Instance == 0 {
		b.lc.pool = newPool(b)
	}
	return b
}

// Name returns the backend's configured name.
func (b *Backend) Name() string { return b.name }

// Config returns the configuration the backend runs with.
func (b *Backend) Config() *config.Backend { return b.cfg }

// Status returns a snapshot of the backend's state.
func (b *Backend) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st
}

// Lists returns the backend's current lists. They are empty unless the
// backend is healthy or unhealthy, or restarting within catalog_grace
// (see Listed).
func (b *Backend) Lists() *Lists { return b.lists.Load() }

// Conn returns the connection to the running child if it has finished its
// handshake, or nil.
func (b *Backend) Conn() *Conn {
	h := b.loadHot()
	if h.state != Healthy && h.state != Unhealthy {
		return nil
	}
	return h.conn
}

// State returns the backend's state, as Status().State would, without
// copying its status under its lock: what a call reads of it.
func (b *Backend) State() State { return b.loadHot().state }

// loadHot returns hot, or a stopped backend's before anything was published.
func (b *Backend) loadHot() hotState {
	if h := b.hot.Load(); h != nil {
		return *h
	}
	return hotState{state: Stopped}
}

// hotState is a backend's state and connection, as one value.
type hotState struct {
	state State
	conn  *Conn
}

// publishLocked publishes st.State and conn to readers of hot. It runs
// under mu, after every change of either.
func (b *Backend) publishLocked() {
	if h := b.hot.Load(); h == nil || h.state != b.st.State || h.conn != b.conn {
		b.hot.Store(&hotState{state: b.st.State, conn: b.conn})
	}
}

// Served returns the lists the backend last served while it ran, whatever
// its state now, or nil if it never ran: what a fallback may stand in for
// (see Lists for what it serves now).
func (b *Backend) Served() *Lists { return b.served.Load() }

// RestartsTotal returns how often the backend restarted after a crash
// since it was made: Status.Restarts, but never reset by an operator's
// start, so that it only grows (a Prometheus counter).
func (b *Backend) RestartsTotal() uint64 { return b.restartsTotal.Load() }

// StderrTail returns up to n of the child's most recent stderr lines.
func (b *Backend) StderrTail(n int) []string { return b.stderr.tail(n, 0) }

// Settled is closed once the first start attempt is decided: the backend is
// healthy, has failed for good, or is not meant to run. By then a healthy
// backend's lists have been published (Options.OnChange has returned).
func (b *Backend) Settled() <-chan struct{} { return b.settled }

// Began returns when Run began, its first start attempt: the zero time
// before.
func (b *Backend) Began() time.Time {
	if n := b.began.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Start starts a stopped or failed backend and waits for its handshake.
func (b *Backend) Start(ctx context.Context) error { return b.command(ctx, opStart) }

// Stop stops the backend and keeps it stopped, through crashes and restarts
// of others, until Start.
func (b *Backend) Stop(ctx context.Context) error { return b.command(ctx, opStop) }

// Restart stops the backend gracefully, starts it at once with its restart
// counters reset, and waits for the new child's handshake.
func (b *Backend) Restart(ctx context.Context) error { return b.command(ctx, opRestart) }

func (b *Backend) command(ctx context.Context, o op) error {
	cmd := command{op: o, done: make(chan error, 1)}
	select {
	case b.cmds <- cmd:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-cmd.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run supervises the backend until ctx ends, then shuts the child down
// gracefully and returns. It must be called once.
func (b *Backend) Run(ctx context.Context) {
	b.began.Store(time.Now().UnixNano())
	if b.IsCLI() {
		b.runCLI(ctx)
		b.drainCommands()
		return
	}
	if b.lc.pool != nil {
		b.lc.pool.run(ctx)
		return
	}
	s := supervision{b: b, want: b.cfg.Enabled, backoff: b.cfg.RestartBackoffInitial}
	if a := b.opts.Adopt; a != nil {
		b.opts.Adopt = nil // its files are the connection's now, or closed
		adopted := time.Now()
		if conn := s.adopt(a); conn != nil && s.serve(ctx, conn) {
			s.crashed(ctx, adopted, nil)
		}
	}
	s.startIdle()
	if !b.cfg.Enabled {
		b.setState(Stopped, func(st *Status) { st.LastError = "" })
		b.settle()
	}
	s.loop(ctx)
	s.stopPrerequisite() // after the backend, which may need it to the end
	b.endGrace()
	b.setState(Stopped, func(st *Status) { st.PID = 0; st.Retrying = false })
	b.settle()
	b.drainCommands()
}

// drainCommands fails the commands that raced with the end of Run: nobody
// answers them any more.
func (b *Backend) drainCommands() {
	for {
		select {
		case cmd := <-b.cmds:
			cmd.done <- ErrShutdown
		default:
			return
		}
	}
}

// supervision is the state of Run's loop; only Run's goroutine touches it.
type supervision struct {
	b        *Backend
	want     bool        // the backend should be running
	crashes  []time.Time // crashes within the restart window
	backoff  time.Duration
	waiters  []chan error // commands waiting for the next start attempt
	prereq   *managedPrereq
	fill     bool // started only to fill the catalog cache (start = "on-demand")
	demanded bool // a call asked for the child while it was starting
}

func (s *supervision) loop(ctx context.Context) {
	b := s.b
	for ctx.Err() == nil {
		if !s.want {
			select {
			case <-ctx.Done():
				return
			case cmd := <-b.cmds:
				s.idleCommand(cmd)
			}
			continue
		}
		conn, started, err := s.start(ctx)
		switch {
		case ctx.Err() != nil:
			if err == nil {
				// The shutdown came just as the handshake succeeded: the
				// connection is ours to end, like one that was serving.
				s.stopConn(conn, "the gateway is shutting down")
			}
			return
		case errors.Is(err, errCommand):
			continue
		case err == nil:
			if s.afterStart(conn) {
				continue // back to idle with its catalog cached
			}
			served := time.Now()
			died := s.serve(ctx, conn)
			b.sessionEnded(conn, served, died)
			if !died {
				continue // ended by a command or the shutdown
			}
		}
		s.crashed(ctx, started, err)
	}
}

var (
	// errCommand marks a start attempt interrupted by an operator command.
	errCommand = errors.New("interrupted by a command")
	// errDied marks a child that exited during its handshake.
	errDied = errors.New("exited during its handshake")
)

// start spawns the child and runs its handshake. Commands that arrive
// meanwhile are obeyed at once: a Stop need not wait for a slow handshake.
func (s *supervision) start(ctx context.Context) (*Conn, time.Time, error) {
	b := s.b
	started := time.Now()
	b.resetCircuit() // a new child starts with a clean slate
	b.setState(Starting, func(st *Status) { st.Retrying = false })
	if err := s.awaitPrerequisites(ctx); err != nil {
		return nil, started, err
	}
	conn, err := b.connect()
	if err != nil {
		return nil, started, err
	}

	hctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	type result struct {
		lists *Lists
		err   error
	}
	hs := make(chan result, 1)
	handshake := func(conn *Conn, probe bool) {
		go func() {
			lists, err := conn.handshake(hctx, probe)
			hs <- result{lists, err}
		}()
	}
	// The legacy HTTP+SSE transport predates server/discover; a child
	// that ended during the last probe is spared it once, and era =
	// "legacy" always.
	probe := b.cfg.Transport != "sse" && b.cfg.Era != config.EraLegacy && !b.skipProbe.Swap(false)
	handshake(conn, probe)
	for {
		select {
		case r := <-hs:
			if errors.Is(r.err, errProbeEnded) {
				// A crash, or a legacy server that exits on a method it
				// does not know: restarted as a crash, with initialize.
				b.skipProbe.Store(true)
				b.log.Info(fmt.Sprintf("backend %q ended during the server/discover probe; its restart starts with initialize", b.name), conn.ident())
				<-conn.Done()
				return nil, started, errDied
			}
			if r.err != nil {
				if errors.Is(r.err, context.DeadlineExceeded) {
					r.err = fmt.Errorf("%w within %s (timeout)", errHandshakeTimeout, b.cfg.Timeout)
				}
				if errors.Is(r.err, ErrGone) {
					<-conn.Done() // it exited: wait for its exit status, which says more
				}
				select {
				case <-conn.Done():
					return nil, started, errDied // its exit status says more
				default:
				}
				conn.reason.Store(ptr("handshake failed: " + Cause(r.err))) // the detail: in startErr
				conn.kill()
				return nil, started, fmt.Errorf("handshake: %w", r.err)
			}
			b.cameBack(r.lists)
			b.lists.Store(r.lists)
			b.served.Store(r.lists)
			b.saveCache(conn.Server(), r.lists)
			if s.fill && !s.demanded {
				// Started only to fill the catalog cache: it never
				// becomes healthy, so no call is admitted to a child
				// that afterStart stops at once; a call waiting
				// meanwhile demanded it (Wake), or starts it again.
				return conn, started, nil
			}
			b.setState(Healthy, func(st *Status) { st.Server = conn.Server(); st.LastError = "" })
			go b.watch(conn)
			b.log.Info(fmt.Sprintf("backend %q ready: %d tools", b.name, len(r.lists.Tools)), conn.ident(), "tools", len(r.lists.Tools), "protocol_version", conn.Server().ProtocolVersion, journal.MessageBackendReady.Attr())
			s.answer(nil)
			b.settle()
			return conn, started, nil
		case cmd := <-b.cmds:
			if cmd.op == opDetach {
				cmd.done <- errNotServing("it is in its handshake")
				continue
			}
			if cmd.op == opStart || cmd.op == opDemand {
				s.demanded = true
				s.waiters = append(s.waiters, cmd.done) // answered when the attempt is decided
				continue
			}
			cancel()
			<-hs
			s.stopConn(conn, "interrupted by the operator during its handshake")
			s.obey(cmd)
			return nil, started, errCommand
		case <-ctx.Done():
			cancel()
			<-hs
			s.stopConn(conn, "the gateway is shutting down")
			return nil, started, ctx.Err()
		}
	}
}

// serve waits while the child runs. It reports whether the child died;
// otherwise a command or the shutdown ended it.
func (s *supervision) serve(ctx context.Context, conn *Conn) (died bool) {
	b := s.b
	conn.touch()
	idle, idleC := s.idleTicker()
	if idle != nil {
		defer idle.Stop()
	}
	var memoryC <-chan time.Time
	mem := b.newMemoryWatch()
	if mem != nil && conn.proc != nil {
		t := time.NewTicker(memoryCheckInterval)
		defer t.Stop()
		memoryC = t.C
	}
	for {
		select {
		case <-memoryC:
			b.checkMemory(mem, conn)
		case <-idleC:
			if s.checkIdle(conn) {
				return false
			}
		case <-ctx.Done():
			s.stopConn(conn, stopReason(ctx))
			return false
		case <-conn.Done():
			return true
		case cmd := <-b.cmds:
			if cmd.op == opStart || cmd.op == opDemand {
				cmd.done <- nil // already running
				continue
			}
			if cmd.op == opDetach {
				d, err := s.detach(conn)
				if err != nil {
					cmd.done <- err
					continue
				}
				*cmd.out = d
				cmd.done <- nil
				// Inert from here on: the server is the next mcpgated's.
				<-ctx.Done()
				return false
			}
			if cmd.op == opRestart {
				// As through a crash: the lists stay (catalog_grace) and
				// calls wait (start_wait) for the new child.
				b.keepListed()
				b.setState(Starting, nil)
			}
			s.stopConn(conn, "stopped by the operator")
			s.obey(cmd)
			return false
		}
	}
}

// stopConn shuts the child down gracefully and forgets it; its lists go
// with it, except through a restart (catalog_grace).
func (s *supervision) stopConn(conn *Conn, why string) {
	s.stopConnKeeping(conn, why, s.b.inGrace())
}

// stopConnKeeping is stopConn, keeping the lists listed if keep: a caller
// that changes the state next (to idle, whose catalog is the cache) must
// not publish a running backend without tools in between, which clients
// would see as every tool gone and back.
func (s *supervision) stopConnKeeping(conn *Conn, why string, keep bool) {
	b := s.b
	conn.reason.Store(ptr(why))
	conn.shutdown(b.opts.GracePeriod)
	if !keep {
		b.lists.Store(&Lists{})
	}
	b.mu.Lock()
	if b.conn == conn {
		b.conn = nil
		b.publishLocked()
	}
	b.mu.Unlock()
	b.update(func(st *Status) { st.PID = 0; st.LastExit = conn.exit })
	b.log.Info(fmt.Sprintf("backend %q stopped: %s (%s)", b.name, why, conn.exit.Text), "backend_pid", conn.PID(), "reason", why, "exit", conn.exit.Text)
}

// obey carries out Stop or Restart once the child is gone.
func (s *supervision) obey(cmd command) {
	b := s.b
	switch cmd.op {
	case opStop:
		s.want = false
		s.stopPrerequisite()
		b.endGrace() // of a restart it interrupted
		b.setState(Stopped, func(st *Status) { st.Retrying = false })
		cmd.done <- nil
	case opRestart:
		s.want = true
		s.reset()
		s.answer(ErrStopped) // Starts waiting on the interrupted attempt
		s.waiters = append(s.waiters, cmd.done)
	}
}

// idleCommand handles a command while the backend is stopped or failed.
func (s *supervision) idleCommand(cmd command) {
	switch cmd.op {
	case opDetach:
		cmd.done <- errNotServing("it is not running")
	case opDemand:
		if s.b.State() != Idle {
			cmd.done <- ErrStopped // stopped by the operator, or failed
			return
		}
		s.want = true
		s.waiters = append(s.waiters, cmd.done)
	case opStop:
		s.b.setState(Stopped, nil)
		cmd.done <- nil
	case opStart, opRestart:
		s.want = true
		s.reset()
		s.waiters = append(s.waiters, cmd.done)
	}
}

// reset forgets past crashes, as systemd does on an explicit start.
func (s *supervision) reset() {
	s.crashes = nil
	s.backoff = s.b.cfg.RestartBackoffInitial
	s.b.update(func(st *Status) { st.Restarts = 0; st.InWindow = 0; st.LastError = "" })
}

// answer replies to the commands waiting for a start attempt.
func (s *supervision) answer(err error) {
	for _, w := range s.waiters {
		w <- err
	}
	s.waiters = nil
}

// crashed records a failed start or a dead child and waits out the backoff,
// or gives up after too many crashes within the restart window.
func (s *supervision) crashed(ctx context.Context, started time.Time, startErr error) {
	b := s.b
	cfg := b.cfg
	b.keepListed() // through the restart, for catalog_grace; before the conn goes
	b.mu.Lock()
	conn := b.conn
	if conn != nil {
		b.conn = nil
		b.publishLocked()
	}
	b.mu.Unlock()

	reason, cause := "", ""
	var exit ExitInfo
	if conn != nil && conn.remote != nil {
		cause = "session ended"
		<-conn.Done()
		if r := conn.reason.Load(); r != nil {
			reason = *r
		}
		b.log.Warn(fmt.Sprintf("backend %q at %s: session ended: %s", b.name, conn.URL(), reason), "backend_url", conn.URL())
	} else if conn != nil {
		<-conn.Done() // its stderr is drained, so the tail has its last words
		tail := b.stderr.tail(10, conn.PID())
		exit = conn.exit
		reason, cause = exit.Text, exit.Text
		var why string
		if r := conn.reason.Load(); r != nil {
			why = *r
			reason = why + " (" + exit.Text + ")"
		}
		x := journal.BackendExit{
			Backend: b.name, PID: conn.PID(), StderrTail: tail, Reason: why, Instance: b.instanceLabel(), Unit: conn.proc.unitName(),
		}
		exit.journalExit(&x)
		journal.LogBackendExit(context.Background(), b.opts.Logger, x)
	}
	if startErr != nil && !errors.Is(startErr, errDied) {
		reason, cause = startErr.Error(), Cause(startErr)
		b.log.Warn(fmt.Sprintf("backend %q could not start: %s", b.name, reason), journal.MessageStartFailed.Attr())
	}
	now := time.Now()
	if now.Sub(started) > cfg.RestartWindow {
		s.crashes, s.backoff = nil, cfg.RestartBackoffInitial // it ran stably
	}
	kept := s.crashes[:0]
	for _, t := range s.crashes {
		if now.Sub(t) < cfg.RestartWindow {
			kept = append(kept, t)
		}
	}
	s.crashes = append(kept, now)

	if len(s.crashes) > cfg.MaxRestarts {
		b.setState(Failed, func(st *Status) {
			st.PID, st.LastExit, st.Retrying = 0, exit, false
			st.InWindow = len(s.crashes)
			st.LastError = fmt.Sprintf("%s; gave up after %d restarts within %s", reason, cfg.MaxRestarts, cfg.RestartWindow)
			st.Cause = fmt.Sprintf("%s; gave up after %d restarts", cause, cfg.MaxRestarts)
		})
		b.log.Error(fmt.Sprintf("backend %q failed: %s; gave up after %d restarts within %s; `mcpgatectl start %s` tries again", b.name, reason, cfg.MaxRestarts, cfg.RestartWindow, b.name),
			"restarts", cfg.MaxRestarts, "window", cfg.RestartWindow, journal.MessageGiveUp.Attr())
		s.want = false
		b.endGrace()
		s.answer(fmt.Errorf("%w: %s", ErrStopped, reason))
		b.settle()
		return
	}
	s.answer(fmt.Errorf("start failed: %s", reason))
	delay := jitter(s.backoff)
	s.backoff = min(2*s.backoff, cfg.RestartBackoffMax)
	b.setState(Starting, func(st *Status) {
		st.PID, st.LastExit, st.LastError, st.Cause, st.Retrying = 0, exit, reason, cause, true
		st.Restarts++
		st.InWindow = len(s.crashes)
		b.restartsTotal.Add(1)
	})
	b.log.Info(fmt.Sprintf("restarting backend %q in %s (attempt %d of max_restarts %d)", b.name, delay.Round(time.Millisecond), len(s.crashes), cfg.MaxRestarts), "in", delay.Round(time.Millisecond), "attempt", len(s.crashes), "max_restarts", cfg.MaxRestarts, journal.MessageRestart.Attr())
	// The start waits for the first attempt only, never for the restarts:
	// the other backends' clients need not wait for this one.
	b.settle()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-ctx.Done():
			return // shutting down: spawn nothing
		case cmd := <-b.cmds:
			switch cmd.op {
			case opDetach:
				cmd.done <- errNotServing("it is waiting to restart")
			case opStop:
				s.want = false
				s.stopPrerequisite()
				b.endGrace()
				b.setState(Stopped, func(st *Status) { st.Retrying = false })
				cmd.done <- nil
				return
			case opRestart:
				s.reset()
				s.waiters = append(s.waiters, cmd.done)
				return
			case opStart:
				s.waiters = append(s.waiters, cmd.done)
				return // an explicit start skips the wait
			case opDemand:
				s.waiters = append(s.waiters, cmd.done) // answered after the wait
			}
		}
	}
}

// jitter spreads restarts of many backends that crashed together: ±20%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (b *Backend) setState(state State, update func(*Status)) {
	if open, _ := b.circuitOpen(); open && state == Healthy {
		state = Unhealthy // until the half-open check closes the circuit
	}
	b.mu.Lock()
	changed := b.st.State != state
	b.st.State = state
	if changed {
		b.st.Since = time.Now()
	}
	if state != Healthy && state != Unhealthy {
		b.st.Server = nil
	}
	if update != nil {
		update(&b.st)
	}
	b.st.clearCause()
	b.publishLocked()
	b.mu.Unlock()
	b.changed()
}

// clearCause keeps Cause from outliving the LastError it stands for.
func (st *Status) clearCause() {
	if st.LastError == "" {
		st.Cause = ""
	}
}

// update changes the status without changing the state.
func (b *Backend) update(fn func(*Status)) {
	b.mu.Lock()
	fn(&b.st)
	b.st.clearCause()
	b.publishLocked()
	b.mu.Unlock()
	b.changed()
}

func (b *Backend) changed() {
	b.wakeWaiters()
	if b.opts.OnChange != nil {
		b.opts.OnChange(b)
	}
}

func (b *Backend) settle() { b.settledOnce.Do(func() { close(b.settled) }) }

// publishLists installs lists refreshed on conn, if conn is still current.
func (b *Backend) publishLists(conn *Conn, lists *Lists) {
	b.mu.Lock()
	current := b.conn == conn
	b.mu.Unlock()
	if current {
		b.lists.Store(lists)
		b.served.Store(lists)
		b.saveCache(conn.Server(), lists)
		b.changed()
	}
}

// initializeParams is what the gateway declares to the child: the client
// capabilities it can relay, and itself.
func (b *Backend) initializeParams() json.RawMessage {
	caps := string(b.relayCapabilities())
	p := []byte(`{"protocolVersion":"` + ProtocolVersion + `","capabilities":` + caps + `,"clientInfo":{"name":"mcpgate","version":`)
	p = jsonrpc.AppendString(p, b.opts.Version)
	return append(p, "}}"...)
}

// logSink logs stderr lines with slog when no journal sink is configured.
type logSink struct{ log *slog.Logger }

func (l logSink) Line(pid int, line []byte, partial bool) {
	l.log.Info(string(line), "backend_pid", pid, "stream", "stderr", "partial", partial)
}

func ptr[T any](v T) *T { return &v }
