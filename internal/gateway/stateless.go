package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// ModernProtocolVersion is the MCP revision the gateway serves without
// sessions: each request carries its version and the client's
// capabilities in _meta.
const ModernProtocolVersion = "2026-07-28"

// Keys of _meta that MCP 2026-07-28 defines.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Error codes of MCP 2026-07-28, from the range the specification reserves.
const (
	CodeHeaderMismatch             = -32020 // HTTP headers disagree with the body, or are missing
	CodeMissingClientCapability    = -32021 // the request needs a capability the client did not declare
	CodeUnsupportedProtocolVersion = -32022 // the request's version is not one the gateway serves statelessly
)

// SupportedVersions lists every protocol version the gateway speaks,
// newest first: the stateless one, then those of sessions.
func SupportedVersions() []string {
	return append([]string{ModernProtocolVersion}, protocolVersions...)
}

// IsModernVersion reports whether v is served statelessly.
func IsModernVersion(v string) bool { return v == ModernProtocolVersion }

// RequestMeta is what a stateless request declares about itself in
// params._meta.
type RequestMeta struct {
	Protocol     string          // io.modelcontextprotocol/protocolVersion
	Capabilities json.RawMessage // io.modelcontextprotocol/clientCapabilities, a JSON object
	// LogLevel is io.modelcontextprotocol/logLevel, "" when absent: the
	// request then gets no log messages at all.
	LogLevel string
	// Header is the request's HTTP header: a tools/call's Mcp-Param-*
	// headers are checked against its arguments once the tool is known.
	Header http.Header
	// Head is what ScanHead found in the request's params, if the
	// caller scanned them: routing reuses it rather than scan again.
	Head RequestHead
	// Profile is the profile the request's path names, "" for the
	// endpoint itself (where the client's own profile applies). It must
	// be configured (see HasProfile).
	Profile string
}

// StatelessRequest returns the routing context of one stateless request
// of client, authenticated as identity (access.Caller.Identity): a Session that lives as long as the request, is in no
// session table and has no standalone stream, so everything it routes
// (policy, audit, limits, fallback, the output pipeline, composites)
// takes the same path as a session's request. The caller answers one
// request with it (NewStream, HandleRequest) and then calls End.
func (g *Gateway) StatelessRequest(meta RequestMeta, client *access.Client, identity string) *Session {
	if client == nil {
		client = access.Anonymous()
	}
	// One allocation holds the context and what it knows of its request.
	r := &struct {
		Session
		one oneRequest
	}{
		Session: Session{
			Protocol:  meta.Protocol,
			g:         g,
			identity:  identity,
			stateless: true,
			logLevel:  -1,
			calls:     make(map[string]*call, 1),
			streams:   make(map[int64]*Stream, 1),
		},
		one: oneRequest{header: meta.Header, head: meta.Head, seq: g.requestSeq.Add(1)},
	}
	s := &r.Session
	s.one = &r.one
	if meta.LogLevel != "" { // most requests set none
		if prio, ok := journal.MCPLevelPriority(meta.LogLevel); ok {
			s.logLevel = prio
		}
	}
	s.caps = capsOf(meta.Capabilities)
	s.standalone = g.nowhere
	s.client.Store(client)
	s.endpoint = meta.Profile
	p, ok := s.resolveProfile(g.profileSet())
	if !ok { // gone meanwhile: nothing, rather than the whole catalog
		name := s.profileName()
		p = &Profile{Name: name, cfg: &config.Profile{Name: name}, names: &access.Policy{}, backends: &access.Policy{}}
	}
	s.profile.Store(p)
	g.requests.add(s)
	return s
}

// capsOf picks the capabilities routing needs out of a clientCapabilities
// object, without decoding the rest.
func capsOf(raw json.RawMessage) clientCaps {
	var c clientCaps
	var values [4]json.RawMessage
	if jsonrpc.FindEach(raw, []string{"sampling", "elicitation", "roots", "extensions"}, values[:]) == nil {
		c.Sampling, c.Elicitation, c.Roots, c.Extensions = values[0], values[1], values[2], values[3]
	}
	return c
}

// Stateless reports whether the session is the context of one stateless
// (2026-07-28) request rather than a 2025 session.
func (s *Session) Stateless() bool { return s.stateless }

// RequestID names a stateless request in the journal, where it has no
// session: its audit entry and the gateway's entries about it carry it
// (MCPGATE_REQUEST), and so does an instance bound to it on D-Bus. It is
// unique within this run of mcpgated, and says nothing of the client. A
// session's context has none: "".
func (s *Session) RequestID() string {
	if s.one == nil || s.one.seq == 0 {
		return ""
	}
	return s.g.requestPrefix + strconv.FormatUint(s.one.seq, 36)
}

// End ends a stateless request's context once its answer is written or
// its client went away: whatever it still has in flight is cancelled
// (the backend gets notifications/cancelled) and an instance it bound is
// released.
func (s *Session) End() {
	if !s.stateless {
		return
	}
	s.g.requests.remove(s)
	s.closeListener()
	s.close("the client closed the response stream")
}

// eachRequest calls fn for every stateless request in flight.
func (g *Gateway) eachRequest(fn func(*Session)) { g.requests.each(fn) }

// goneIn2026 lists the methods MCP 2026-07-28 removed, with what replaces
// them; a stateless request for one gets -32601, as for any unknown method.
var goneIn2026 = map[string]string{
	"initialize":            "2026-07-28 has no initialize: every request carries its version in _meta",
	"ping":                  "2026-07-28 has no ping",
	"logging/setLevel":      "2026-07-28 sets the log level per request, in _meta " + MetaLogLevel,
	"resources/subscribe":   "2026-07-28 subscribes with subscriptions/listen",
	"resources/unsubscribe": "2026-07-28 ends a subscription by closing the subscriptions/listen stream",
	"tasks/result":          "the Tasks extension of 2026-07-28 inlines a task's result in tasks/get",
	"tasks/list":            "the Tasks extension of 2026-07-28 has no tasks/list",
}

// gone answers a stateless request for a method 2026-07-28 removed, and
// reports whether it was one.
func (s *Session) gone(msg *jsonrpc.Message, stream *Stream) bool {
	why, ok := goneIn2026[msg.Method]
	if ok {
		stream.push(errorResponse(msg.ID, jsonrpc.CodeMethodNotFound, "method not found: %s (%s)", msg.Method, why), true)
	}
	return ok
}

// discover answers server/discover: what the merged catalog offers this
// client, the versions the gateway speaks, who it is and the backends'
// instructions. The capabilities are those initialize would advertise.
func (s *Session) discover(msg *jsonrpc.Message, stream *Stream) {
	init := s.g.initializeResult(s)
	caps, _, _ := jsonrpc.Lookup(init, "capabilities")
	instructions, _, hasInstructions := jsonrpc.Lookup(init, "instructions")
	out := []byte(`{"supportedVersions":["` + strings.Join(SupportedVersions(), `","`) + `"],"capabilities":`)
	out = append(out, caps...)
	if hasInstructions {
		out = append(out, `,"instructions":`...)
		out = append(out, instructions...)
	}
	out = append(out, '}')
	stream.push(jsonrpc.AppendResult(nil, msg.ID, out), true)
}

// requestLevel has conn log at least as verbosely as a stateless request
// asked (prio, a syslog priority) before the request goes out: a 2025
// backend has one log level for all its clients, set with
// logging/setLevel, and the gateway filters what each request gets. The
// level a stateless request set only ever rises while the connection
// lives, and never goes below what the sessions that see the backend want.
func (g *Gateway) requestLevel(conn *backend.Conn, prio int) {
	if conn.Server() == nil || conn.Server().Capabilities.Logging == nil || conn.Modern() || conn.Dual() {
		return // a 2026-07-28 backend gets the request's own level in _meta
	}
	g.levelMu.Lock()
	defer g.levelMu.Unlock()
	if g.requestLevels[conn] > prio {
		return // as verbose already
	}
	g.requestLevels[conn] = prio + 1
	level := max(prio, g.mostVerbose(conn.Backend(), -1))
	conn.Async("logging/setLevel", levelParams(level), conn.Backend().Config().Timeout, func(*jsonrpc.Message, error) {})
}
