package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Session is one client's MCP session with the gateway.
type Session struct {
	ID       string
	Protocol string // the negotiated protocol version
	g        *Gateway
	caps     clientCaps
	offered  offeredCaps // what the gateway advertised at initialize
	// stateless marks the context of one 2026-07-28 request (see
	// StatelessRequest): no ID, no standalone stream, in no session table.
	stateless bool
	closed    bool // guarded by mu; here, beside the other bools, to keep the struct small
	client    atomic.Pointer[access.Client]
	// identity is who authenticated when the session (or the request)
	// began (access.Caller.Identity): what the session and the
	// requestState of its calls are bound to.
	identity string
	// upstream is who the session's calls are sent for (see
	// upstream.go): the caller of its latest request; nil until a
	// request came with one (never without auth: an idle session pays
	// one pointer).
	upstream atomic.Pointer[upstreamCaller]
	shape    // its profile, and what search mode added to its list
	// one is what the context of one stateless request knows of it; nil
	// in a session, which keeps none of it.
	one *oneRequest

	mu         sync.Mutex
	lastActive time.Time
	logLevel   int                // most verbose syslog priority wanted; -1: never set
	subs       map[string]string  // subscribed uri → owning backend
	calls      map[string]*call   // requests in flight, by the client's raw id
	relays     map[int64]*relayed // requests to the client, by the id we gave them
	nextRelay  int64
	streams    map[int64]*Stream // open streams, by key
	nextStream int64
	standalone *Stream
	instances  map[string]*backend.Backend // this session's own instances, by backend name
	urls       *urlElicitations            // URL elicitations sent to the client (urlelicit.go); nil before the first
	// deadlines fires by the nearest deadline of the calls in flight (see
	// armDeadline); deadlineAt is when, in unix ns, 0 when not armed.
	deadlines  *time.Timer
	deadlineAt int64
	// traced is what mcp.server.session.duration needs of it; nil
	// without telemetry.
	traced *sessionTrace

	bindMu sync.Mutex // serialises binding instances, see instanceConn

	listed atomic.Uint32 // the kinds of list the session asked for (see firstList)
}

// oneRequest is what the context of one stateless request knows of it.
type oneRequest struct {
	// listenID and listenTag mark the context of a subscriptions/listen
	// request: its id, and the params that tag its notifications.
	listenID  json.RawMessage
	listenTag json.RawMessage
	// request is the stateless request, whose method and name a
	// requestState issued for it is bound to (see requestBinding).
	request *jsonrpc.Message
	// header is the stateless request's HTTP header, for its Mcp-Param-*
	// headers (see checkParamHeaders).
	header http.Header
	// head is what the front found in the stateless request's params.
	head RequestHead
	// shard is the request's shard of Gateway.requests.
	shard uint8
	// seq numbers the request, for RequestID.
	seq uint64
}

// listenTag is the tag of a listener's notifications, nil for others.
func (s *Session) listenTag() json.RawMessage {
	if s.one == nil {
		return nil
	}
	return s.one.listenTag
}

type clientCaps struct {
	Sampling    json.RawMessage `json:"sampling"`
	Elicitation json.RawMessage `json:"elicitation"`
	Roots       json.RawMessage `json:"roots"`
	Extensions  json.RawMessage `json:"extensions"` // 2026-07-28: io.modelcontextprotocol/tasks among them
}

type offeredCaps struct {
	tools, prompts, resources bool
}

// NewSession handles an initialize request of client, authenticated as
// identity (access.Caller.Identity): it negotiates the protocol version
// and returns the new session with its initialize result. Beyond the
// client's max_sessions it returns an *access.LimitError.
func (g *Gateway) NewSession(params json.RawMessage, client *access.Client, identity string) (*Session, json.RawMessage, error) {
	return g.NewSessionAt(params, client, identity, "")
}

// NewSessionAt is NewSession at the path of the named profile ("" for the
// endpoint itself, where the client's own profile applies). An unknown
// profile is refused.
func (g *Gateway) NewSessionAt(params json.RawMessage, client *access.Client, identity, profile string) (*Session, json.RawMessage, error) {
	if g.draining.Load() {
		return nil, nil, jsonrpc.Errorf(CodeShuttingDown, "the gateway is shutting down")
	}
	if client == nil {
		client = access.Anonymous()
	}
	var p struct {
		ProtocolVersion string     `json:"protocolVersion"`
		Capabilities    clientCaps `json:"capabilities"`
	}
	if err := json.Unmarshal(params, &p); params != nil && err != nil {
		return nil, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "initialize: malformed params: %v", err)
	}
	// The slot is taken before the session exists, so that concurrent
	// initializes cannot overshoot the bound.
	if n := g.nsess.Add(1); g.opts.MaxSessions > 0 && n > int64(g.opts.MaxSessions) {
		g.nsess.Add(-1)
		g.log.Warn(fmt.Sprintf("refused a new session of client %q: max_sessions reached", client.Name), "client", client.Name, "max_sessions", g.opts.MaxSessions)
		return nil, nil, &jsonrpc.Error{Code: CodeOverloaded, Message: fmt.Sprintf(
			"the gateway already serves %d sessions (max_sessions); retry once one ends, or end unused sessions with DELETE", g.opts.MaxSessions)}
	}
	version := p.ProtocolVersion
	if !SupportsProtocolVersion(version) {
		version = LatestProtocolVersion
	}
	s := &Session{
		ID:         newID(),
		Protocol:   version,
		g:          g,
		caps:       p.Capabilities,
		lastActive: time.Now(),
		logLevel:   -1,
		identity:   identity,
	}
	if g.opts.Telemetry != nil {
		s.traced = &sessionTrace{begun: s.lastActive}
	}
	// The session's maps are made when first written: an idle session
	// keeps none. Its standalone stream, key 0, is in none of them.
	s.standalone = newStream(0, true, g.opts.MaxStreamEvents)
	s.client.Store(client)
	s.endpoint = profile
	shown, ok := s.resolveProfile(g.profileSet())
	if !ok {
		g.nsess.Add(-1)
		return nil, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "no profile %q is configured; initialize again once the configuration names one", s.profileName())
	}
	s.profile.Store(shown)
	if err := g.admit(client); err != nil {
		g.nsess.Add(-1) // the global slot taken above
		return nil, nil, err
	}
	result := g.initializeResult(s)
	g.sessions.Store(s.ID, s)
	return s, result, nil
}

// initializeResult advertises what the healthy backends provide, and
// list_changed for every list, which the gateway relays. While a backend is
// still in its handshake, what it will provide is unknown: every list is
// offered, so that its tools, prompts and resources can join with
// list_changed once it is ready.
func (g *Gateway) initializeResult(s *Session) json.RawMessage {
	var tools, prompts, resources, subscribe, logging, completions, legacyTasks, modernTasks bool
	var instructions []string
	for _, b := range g.registry.Backends() {
		if s.stateless && !s.seesBackend(b.Name()) {
			continue // server/discover answers per client
		}
		_, info := b.Catalog()
		if info == nil {
			if starting(b) {
				tools, prompts, resources = true, true, true
			}
			continue
		}
		c := info.Capabilities
		tools = tools || c.Tools != nil
		prompts = prompts || c.Prompts != nil
		if c.Resources != nil {
			resources = true
			subscribe = subscribe || c.Resources.Subscribe
		}
		logging = logging || c.Logging != nil
		completions = completions || c.Completions != nil
		if l, m := tasksOffered(info); (l || m) && s.callsBackend(b.Name()) {
			legacyTasks, modernTasks = legacyTasks || l, modernTasks || m
		}
		// A backend's instructions name it and what it does: only for a
		// client that may see something of it. (Its capabilities stay
		// offered to sessions, whose view a reload may widen.)
		if text := strings.TrimSpace(info.Instructions); text != "" && (s.stateless || s.seesBackend(b.Name())) {
			instructions = append(instructions, "## "+b.Name()+"\n"+text)
		}
	}
	resources = resources || g.opts.StatusResources
	s.offered = offeredCaps{tools: tools, prompts: prompts, resources: resources}
	var caps []string
	if tools {
		caps = append(caps, `"tools":{"listChanged":true}`)
	}
	if prompts {
		caps = append(caps, `"prompts":{"listChanged":true}`)
	}
	if resources {
		caps = append(caps, `"resources":{"listChanged":true,"subscribe":`+strconv.FormatBool(subscribe)+`}`)
	}
	if logging {
		caps = append(caps, `"logging":{}`)
	}
	if completions {
		caps = append(caps, `"completions":{}`)
	}
	if legacyTasks && !s.stateless {
		caps = append(caps, legacyTasksCapability)
	}
	if modernTasks && s.stateless {
		caps = append(caps, modernTasksCapability)
	}
	out := []byte(`{"protocolVersion":"` + s.Protocol + `","capabilities":{` + strings.Join(caps, ",") + `},"serverInfo":{"name":"mcpgate","title":"mcpgate","version":`)
	out = jsonrpc.AppendString(out, g.opts.Version)
	out = append(out, '}')
	if len(instructions) > 0 {
		out = append(out, `,"instructions":`...)
		out = jsonrpc.AppendString(out, strings.Join(instructions, "\n\n"))
	}
	return append(out, '}')
}

// starting reports whether b is in its first start attempt, or waits to
// try again: it may yet join the catalog.
func starting(b *backend.Backend) bool {
	select {
	case <-b.Settled():
		return b.State() == backend.Starting
	default:
		return true
	}
}

// SetTransport records the network.transport ("tcp", "unix") the
// session's initialize came on, for the histogram of session durations.
func (s *Session) SetTransport(transport string) {
	if s.traced == nil {
		return
	}
	s.mu.Lock()
	s.traced.transport = transport
	s.mu.Unlock()
}

func (s *Session) touch() {
	s.mu.Lock()
	s.lastActive = time.Now()
	s.mu.Unlock()
}

// idleSince is how long the session has sent nothing and had no request in
// flight. An open standalone event stream does not count: a client that
// went away without DELETE may leave its GET connection open for good.
func (s *Session) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) > 0 {
		return 0
	}
	return now.Sub(s.lastActive)
}

// NewStream opens the stream that will carry the answers to requests POSTed
// together: one request, or the requests of a batch. A client that accepts
// no event stream gets only the responses on it (eventStream false).
func (s *Session) NewStream(requests int, eventStream bool) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextStream++
	st := newRequestStream(s.nextStream, s.g.opts.MaxStreamEvents)
	st.finalsLeft = requests
	st.jsonOnly = !eventStream
	st.owner = s
	if s.closed {
		st.finish()
		return st
	}
	put(&s.streams, st.Key, st)
	return st
}

// Standalone returns the session's stream for messages not tied to a request.
func (s *Session) Standalone() *Stream { return s.standalone }

// ResumeStream returns the stream an event id belongs to, if it is still
// open, and the seq to resume after.
func (s *Session) ResumeStream(lastEventID string) (*Stream, int64, bool) {
	keyStr, seqStr, ok := strings.Cut(lastEventID, "-")
	key, err1 := strconv.ParseInt(keyStr, 10, 64)
	seq, err2 := strconv.ParseInt(seqStr, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil, 0, false
	}
	s.mu.Lock()
	st, found := s.streams[key]
	if key == 0 && !s.stateless {
		st, found = s.standalone, !s.closed
	}
	s.mu.Unlock()
	if found {
		st.release(seq) // the client has these
	}
	return st, seq, found
}

// StreamDone forgets a request's stream at once: it can no longer be
// resumed. Streams written as event streams are forgotten by Detach, a
// resume window after their client left.
func (s *Session) StreamDone(st *Stream) {
	if st.standalone {
		return
	}
	s.mu.Lock()
	delete(s.streams, st.Key)
	s.mu.Unlock()
}

// Caps reports whether the client declared sampling, elicitation and roots.
func (s *Session) hasCapability(method string) bool {
	switch method {
	case "sampling/createMessage":
		return s.caps.Sampling != nil
	case "elicitation/create":
		return s.caps.Elicitation != nil
	case "roots/list":
		return s.caps.Roots != nil
	}
	return true
}

// HandleNotification handles a notification from the client.
func (s *Session) HandleNotification(msg *jsonrpc.Message) {
	s.touch()
	if err := checkDecided(msg.Method, msg.Params, false); err != nil {
		s.ambiguous(msg.Method, err)
		return
	}
	switch msg.Method {
	case "notifications/initialized":
	case "notifications/cancelled":
		idRaw, _, ok := jsonrpc.Lookup(msg.Params, "requestId")
		if !ok {
			return
		}
		reason := "cancelled by the client"
		if r, _, ok := jsonrpc.Lookup(msg.Params, "reason"); ok {
			if text, ok := jsonrpc.StringValue(r); ok {
				reason = text
			}
		}
		s.mu.Lock()
		c := s.calls[string(idRaw)]
		s.mu.Unlock()
		if c != nil {
			c.cancel(reason)
		} else {
			s.g.cancelLocal(s, idRaw)
		}
	case "notifications/roots/list_changed":
		var relaying []*backend.Backend
		for _, b := range s.g.registry.Backends() {
			if b.Config().RelayClientRequests && len(b.Config().Roots) == 0 && s.seesBackend(b.Name()) {
				relaying = append(relaying, b)
			}
		}
		s.notifyAll(relaying, msg.Method, nil)
	default:
		// Unknown notifications pass through where they cannot be
		// misrouted, and only from clients that may use everything: what
		// one means cannot be checked against a policy.
		if !s.view().unrestricted() {
			s.g.log.Debug("dropped an unknown notification from a client with a policy", "session", s.ID, "client", s.Client().Name, "method", msg.Method)
			return
		}
		if b := s.g.soleBackend(); b != nil {
			s.notifyAll([]*backend.Backend{b}, msg.Method, jsonrpc.Compact(msg.Params))
		}
	}
}

// HandleResponse handles the client's answer to a request a backend sent.
func (s *Session) HandleResponse(msg *jsonrpc.Message) {
	s.touch()
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	s.mu.Lock()
	r := s.relays[id]
	delete(s.relays, id)
	s.mu.Unlock()
	if err != nil || r == nil || s.g.takeRelay(r.conn, r.backendID) == nil {
		s.g.log.Warn("dropped a response to an unknown, expired or cancelled request", "session", s.ID, "id", string(msg.ID))
		return
	}
	if msg.Error != nil {
		r.replyRawError(jsonrpc.Compact(msg.Error))
	} else {
		r.reply(jsonrpc.Compact(msg.Result))
	}
}

// send delivers a server-initiated message on the given stream if it is
// still open, else on the standalone stream.
func (s *Session) send(data []byte, via *Stream) {
	if via == nil || !via.push(data, false) {
		s.standalone.push(data, false)
	}
}

// listChanged tells the client a list changed, if it was offered that list.
func (s *Session) listChanged(method string) {
	offered := s.offered.tools
	switch method {
	case "notifications/prompts/list_changed":
		offered = s.offered.prompts
	case "notifications/resources/list_changed":
		offered = s.offered.resources
	}
	if offered {
		s.standalone.push(s.notification(method, nil), false)
	}
}

// put sets (*m)[k] = v, and makes *m first if it is nil.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = make(map[K]V)
	}
	(*m)[k] = v
}

// swapIfAny returns *m and leaves nil in its place if *m has entries; it
// returns nil and leaves an empty *m as it is.
func swapIfAny[K comparable, V any](m *map[K]V) map[K]V {
	if len(*m) == 0 {
		return nil
	}
	old := *m
	*m = nil
	return old
}

// close ends the session: requests in flight are cancelled, streams end,
// subscriptions and relayed requests are dropped.
func (s *Session) close(why string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.deadlines != nil {
		s.deadlines.Stop()
	}
	// Each map with entries is taken, and its entries ended by the loops
	// below outside the lock (StreamDone deletes from the streams map
	// meanwhile).
	calls := swapIfAny(&s.calls)
	relays := swapIfAny(&s.relays)
	subs := swapIfAny(&s.subs)
	streams := swapIfAny(&s.streams)
	instances := swapIfAny(&s.instances)
	s.mu.Unlock()
	defer s.releaseInstances(instances)
	for _, c := range calls {
		c.cancel(why)
	}
	s.g.cancelLocals(s)
	for _, r := range relays {
		if s.g.takeRelay(r.conn, r.backendID) == nil {
			continue // answered, expired or cancelled meanwhile
		}
		r.replyError(jsonrpc.Errorf(jsonrpc.CodeInternalError, "the client session ended before answering %s: %s", r.method, why))
	}
	for uri, owner := range subs {
		s.g.unsubscribe(owner, uri)
	}
	for _, st := range streams {
		st.finish()
	}
	if !s.stateless {
		s.standalone.finish()
	}
}
