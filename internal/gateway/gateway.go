// Package gateway implements MCP's server side over many backends: client
// sessions, the aggregated catalog, and routing of requests, responses and
// notifications between client and backend id spaces.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// Supported protocol versions, newest first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// LatestProtocolVersion is the newest MCP version the gateway speaks.
const LatestProtocolVersion = "2025-11-25"

// SupportsProtocolVersion reports whether v is a version the gateway speaks.
func SupportsProtocolVersion(v string) bool {
	for _, s := range protocolVersions {
		if s == v {
			return true
		}
	}
	return false
}

// Gateway-specific JSON-RPC error codes, in the implementation-defined range.
const (
	CodeBackendUnavailable = -32000 // the backend is starting, stopped or failed
	CodeTimeout            = -32001 // the backend did not answer in time
	CodeShuttingDown       = -32003 // the gateway is draining
	CodeResourceNotFound   = -32002 // as MCP specifies for resources/read
	CodeMessageTooLarge    = -32004 // a message exceeded max_message_bytes
	CodeBackendBusy        = -32005 // max_concurrent_calls or rate_limit refused the call
	CodeOverloaded         = -32005 // max_sessions or max_concurrent_requests reached
)

// Registry gives the gateway the current set of backends.
type Registry interface {
	// Backends returns all configured backends, sorted by name.
	Backends() []*backend.Backend
	// Backend returns the backend with the given name, or nil.
	Backend(name string) *backend.Backend
}

// Options configure a Gateway.
type Options struct {
	Version  string // reported in serverInfo
	PageSize int    // items per page of list results
	// ResumeWindow is how long a request whose client lost its event stream
	// stays alive, waiting for the client to resume the stream, before it is
	// cancelled.
	ResumeWindow time.Duration
	// SessionIdleTimeout ends sessions that sent no request for so long
	// and have none in flight, whether or not an event stream is open.
	SessionIdleTimeout time.Duration
	// MaxSessions bounds the sessions open at once; 0 means no bound.
	MaxSessions int
	// MaxSubscriptions bounds the resources one session is subscribed to
	// at once; 0 means no bound.
	MaxSubscriptions int
	// MaxStreamEvents bounds the events a stream keeps for resumption;
	// responses are kept besides. Default DefaultMaxStreamEvents.
	MaxStreamEvents int
	Logger          *slog.Logger
	// OnLog, if set, receives every notifications/message from a backend
	// (or an instance of one), e.g. to write it to the journal.
	OnLog func(b *backend.Backend, params []byte)
	// OnCatalog, if set, is called after the catalog changed.
	OnCatalog func(*catalog.Catalog)
	// Audit journals every tools/call, prompts/get and resources/read.
	Audit bool
	// StatusResources serves mcpgate://health and mcpgate://backend/NAME.
	StatusResources bool
	// Integrity, if set, decides what of each backend's lists clients see.
	Integrity Integrity
	// Refusals, if set, journals calls of what a client's policy hides.
	Refusals *access.Refusals
	// OnSessions, if set, is called after a session of a client opened or
	// closed (SessionsByClient changed). It must not block.
	OnSessions func()
	// Input, if set, takes what backends ask the clients of stateless
	// requests (see InputHandler); nil refuses it.
	Input InputHandler
	// MaxTasks bounds the tasks (MCP Tasks) routed at once, and
	// MaxTasksPerClient those of one client; 0 means no bound. MaxTaskTTL
	// bounds how long one is kept (default 24h).
	MaxTasks, MaxTasksPerClient int
	MaxTaskTTL                  time.Duration
	// FirstListWait bounds, from each backend's first start, how long a
	// session's first list waits for backends in their first handshake
	// (see startup.go); 0 waits for none.
	FirstListWait time.Duration
	// Telemetry, if set, traces and measures every request and every
	// message to a backend on its behalf (see telemetry.go); nil is off.
	Telemetry *telemetry.Telemetry
}

// Gateway is the MCP server clients talk to.
type Gateway struct {
	opts     Options
	log      *slog.Logger
	registry Registry

	catalog   atomic.Pointer[catalog.Catalog]
	rebuildMu sync.Mutex // serialises catalog rebuilds and their notifications
	conflicts map[string]bool

	sessions  sync.Map     // session id → *Session
	requests  requestSet   // stateless requests in flight
	listeners sync.Map     // *Session of a subscriptions/listen stream → struct{}
	nowhere   *Stream      // the ended stream stateless requests have as standalone
	modern    modernResult // what results for stateless requests get
	nsess     atomic.Int64 // sessions stored (or being made), bounded by MaxSessions
	perClient clientSessions
	progress  sync.Map     // gateway progress token (as JSON) → *call
	tokens    atomic.Int64 // numbers composite runs

	// requestDeadlines fires by the nearest deadline of the calls of the
	// stateless requests in flight (see deadline.go).
	requestDeadlines sharedDeadline

	// requestPrefix and requestSeq make the RequestIDs of stateless
	// requests: random per run, then a sequence.
	requestPrefix string
	requestSeq    atomic.Uint64

	subsMu sync.Mutex
	subs   map[subKey]int // subscribing sessions per backend and uri

	// levelMu orders log levels: each is worked out from the sessions'
	// levels and sent before the next one is (setLevel, releaseLevel).
	levelMu sync.Mutex
	// requestLevels is the most verbose log level stateless requests had
	// each connection use, as syslog priority + 1; guarded by levelMu.
	requestLevels map[*backend.Conn]int

	relayMu sync.Mutex
	relays  map[relayKey]*relayed // server→client requests, by backend side

	tasks *taskTable // MCP Tasks (tasks.go)

	draining atomic.Bool
	inflight atomic.Int64  // requests forwarded and not yet answered
	idle     chan struct{} // signalled when inflight drops to zero

	settings atomic.Pointer[settings] // see Configure
	// standIns are the exposed names of the tools of stopped or failed
	// backends that stay listed for their fallbacks, by backend.
	standIns atomic.Pointer[map[string][]string]
	outputState
	localState
	profileState
}

type subKey struct{ backend, uri string }

type relayKey struct {
	conn *backend.Conn
	id   string
}

// New returns a gateway over the backends of registry.
func New(registry Registry, opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.SessionIdleTimeout <= 0 {
		opts.SessionIdleTimeout = time.Hour
	}
	g := &Gateway{
		opts:      opts,
		log:       opts.Logger,
		registry:  registry,
		conflicts: map[string]bool{},
		subs:      map[subKey]int{},
		relays:    map[relayKey]*relayed{},
		idle:      make(chan struct{}, 1),
	}
	g.requestLevels = map[*backend.Conn]int{}
	g.tasks = newTaskTable(g, opts.MaxTasks, opts.MaxTasksPerClient, opts.MaxTaskTTL)
	g.requestPrefix = "r" + newID()[:8] + "-"
	g.catalog.Store(catalog.Build(nil))
	g.nowhere = newStream(-1, true, 1)
	g.nowhere.finished = true
	g.modern.init(opts.Version)
	g.localState.init()
	return g
}

// Catalog returns the current catalog snapshot.
func (g *Gateway) Catalog() *catalog.Catalog { return g.catalog.Load() }

// Refresh rebuilds the catalog from the healthy backends and tells sessions
// about lists that changed. Call it after any backend changed.
func (g *Gateway) Refresh() {
	g.rebuildMu.Lock()
	defer g.rebuildMu.Unlock()
	var sources []catalog.Source
	held := map[string]bool{} // exposed names of tools held back by Integrity
	if g.opts.StatusResources {
		sources = append(sources, g.statusSource())
	}
	for _, b := range g.registry.Backends() {
		lists, server := b.Catalog()
		if server == nil {
			continue // not running, nor kept through a restart (catalog_grace) or idle (on-demand)
		}
		lists = g.integrityFilter(b, lists, held)
		sources = append(sources, catalog.Source{Backend: b.Name(), Prefix: b.Config().ToolPrefix, Lists: lists})
	}
	standIns, kept := g.standInSources(held)
	sources = append(sources, standIns...)
	g.standIns.Store(&kept)
	// Composites come last: a backend's tool keeps a name both claim.
	sources = append(sources, g.withoutHeldComposites(g.compositeSource(), held))
	next := catalog.Build(sources)
	next.Conflicts = append(next.Conflicts, g.compositeWarnings(next)...)
	prev := g.catalog.Swap(next)
	seen := map[string]bool{}
	for _, c := range next.Conflicts {
		seen[c] = true
		if !g.conflicts[c] {
			g.log.Warn("catalog conflict: " + c)
		}
	}
	g.conflicts = seen
	changed := func(a, b string, method string) {
		if a != b {
			tell := func(s *Session) {
				if s.viewChanged(prev, next, method) {
					s.listChanged(method)
				}
			}
			g.eachSession(tell)
			g.eachListener(tell)
		}
	}
	changed(prev.ToolsDigest, next.ToolsDigest, "notifications/tools/list_changed")
	changed(prev.PromptsDigest, next.PromptsDigest, "notifications/prompts/list_changed")
	changed(prev.ResourcesDigest, next.ResourcesDigest, "notifications/resources/list_changed")
	if g.opts.OnCatalog != nil {
		g.opts.OnCatalog(next)
	}
}

func (g *Gateway) eachSession(fn func(*Session)) {
	g.sessions.Range(func(_, v any) bool {
		fn(v.(*Session))
		return true
	})
}

// Session returns the session with the given id, or nil.
func (g *Gateway) Session(id string) *Session {
	v, ok := g.sessions.Load(id)
	if !ok {
		return nil
	}
	s := v.(*Session)
	s.touch()
	return s
}

// NumSessions returns the number of open sessions.
func (g *Gateway) NumSessions() int { return int(g.nsess.Load()) }

// CloseSession ends a session: its requests in flight are cancelled, its
// streams end and its subscriptions are dropped. It reports whether the
// session existed.
func (g *Gateway) CloseSession(id string, why string) bool {
	v, ok := g.sessions.LoadAndDelete(id)
	if ok {
		g.nsess.Add(-1)
		s := v.(*Session)
		g.release(s.Client().Name)
		s.close(why)
		s.releaseLevel()
		s.sessionEnded()
	}
	return ok
}

// StopAccepting makes the gateway refuse new requests and sessions from now
// on, as Drain does first, without waiting for the requests in flight.
func (g *Gateway) StopAccepting() {
	g.draining.Store(true)
	g.endListeners("the gateway is shutting down")
	g.endWaitingInputs()
}

// CutOff answers every request still in flight with a CodeShuttingDown
// error saying why, and tells the backends they are cancelled: what is left
// once Drain gave up waiting.
func (g *Gateway) CutOff(why string) {
	cut := func(s *Session) {
		s.mu.Lock()
		calls := make([]*call, 0, len(s.calls))
		for _, c := range s.calls {
			calls = append(calls, c)
		}
		s.mu.Unlock()
		for _, c := range calls {
			c.abort(CodeShuttingDown, why)
		}
	}
	g.eachSession(cut)
	g.eachRequest(cut)
	if t, ok := g.opts.Input.(*Continuations); ok {
		t.cutOff(why)
	}
}

// endWaitingInputs cancels the calls that wait for a stateless client's
// retry: a draining gateway refuses that retry, so waiting is in vain.
func (g *Gateway) endWaitingInputs() {
	if t, ok := g.opts.Input.(*Continuations); ok {
		t.endWaiting("the gateway is shutting down")
	}
}

// Drain makes the gateway refuse new requests and waits until the requests
// in flight are answered or ctx ends.
func (g *Gateway) Drain(ctx context.Context) error {
	g.StopAccepting()
	for g.inflight.Load() > 0 {
		select {
		case <-g.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// callEnded counts a forwarded request as answered.
func (g *Gateway) callEnded() {
	if g.inflight.Add(-1) == 0 {
		select {
		case g.idle <- struct{}{}:
		default:
		}
	}
}

// Close ends every session, and every cli program and composite still
// running, waiting until those programs are killed and reaped.
func (g *Gateway) Close() {
	g.eachSession(func(s *Session) { g.CloseSession(s.ID, "the gateway is shutting down") })
	g.endListeners("the gateway is shutting down")
	g.eachRequest(func(s *Session) { s.close("the gateway is shutting down") })
	g.requestDeadlines.stop()
	if t, ok := g.opts.Input.(*Continuations); ok {
		t.cutOff("the gateway is shutting down")
	}
	g.closeLocal()
}

// Run expires idle sessions until ctx ends.
func (g *Gateway) Run(ctx context.Context) {
	// A quarter of the timeout, so sessions end at most 25% late; at least
	// a millisecond, which a timeout of a few nanoseconds would not give.
	tick := time.NewTicker(max(min(g.opts.SessionIdleTimeout/4, time.Minute), time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			g.eachSession(func(s *Session) {
				if s.idleSince(now) > g.opts.SessionIdleTimeout {
					g.log.Info(fmt.Sprintf("ending an idle session of client %q", s.Client().Name), "session", s.ID, "client", s.Client().Name)
					g.CloseSession(s.ID, "the session was idle too long")
				}
			})
		}
	}
}

// newToken returns a progress token for a call: random, so that a backend
// cannot guess the tokens of other backends' calls.
func newToken() string { return `"` + newID() + `"` }

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errorResponse builds a JSON-RPC error response to the client's id.
func errorResponse(id []byte, code int, format string, args ...any) []byte {
	return jsonrpc.AppendError(nil, id, jsonrpc.Errorf(code, format, args...))
}

// unavailable explains why a backend cannot take calls.
func unavailable(b *backend.Backend) error {
	st := b.Status()
	msg := "backend \"" + b.Name() + "\" is " + st.State.String()
	switch {
	case st.State == backend.Starting && st.Retrying:
		msg = "backend \"" + b.Name() + "\" is restarting after a crash"
	case st.State == backend.Failed:
		msg += " (gave up restarting it; `mcpgatectl start " + b.Name() + "` tries again)"
	case st.State == backend.Stopped:
		msg += " (`mcpgatectl start " + b.Name() + "` starts it)"
	}
	if st.Cause != "" {
		msg += ": " + st.Cause // never LastError, which can quote the server
	}
	return errors.New(msg)
}
