package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// ModernProtocolVersion is the MCP version the gateway speaks to a backend
// that answers server/discover with it: no initialize and no session, the
// version, capabilities and client in the _meta of every request.
const ModernProtocolVersion = "2026-07-28"

// Era is the generation of MCP a backend's server speaks, learned anew at
// every start of its process or connection.
type Era uint8

// The eras.
const (
	EraUnknown Era = iota // not started yet
	EraLegacy             // the initialize handshake (2025-11-25 and before)
	EraModern             // 2026-07-28: stateless, probed with server/discover
	// EraDual is a server whose server/discover lists both 2026-07-28
	// and ProtocolVersion. It is one process, or one remote server,
	// whatever eras its clients speak. Over HTTP it is initialized as a
	// legacy one, and the requests of 2026-07-28 clients go to it in their
	// own era, statelessly (see Conn.GoModern). Over stdio, where the
	// first message picks a connection's era (in the Go SDK and the
	// TypeScript SDK alike), the probe has picked 2026-07-28: the
	// connection is a modern one, and 2025 sessions are served through the
	// same translation as from a server of that era alone.
	EraDual
)

// String is how status and D-Bus show the era: "modern", "legacy",
// "dual" or "".
func (e Era) String() string {
	switch e {
	case EraLegacy:
		return "legacy"
	case EraModern:
		return "modern"
	case EraDual:
		return "dual"
	}
	return ""
}

// Era is the era of the server that gave this information: unknown for
// none, or for a cli backend's programs, which speak no MCP.
func (s *ServerInfo) Era() Era {
	switch {
	case s == nil || s.ProtocolVersion == "":
		return EraUnknown
	case s.Dual:
		return EraDual
	case s.ProtocolVersion == ModernProtocolVersion:
		return EraModern
	}
	return EraLegacy
}

// Meta keys of the 2026-07-28 per-request fields.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
)

// Modern reports whether the connection speaks 2026-07-28 to its server.
// It is decided by the handshake, before any call is sent.
func (c *Conn) Modern() bool { return c.modern.Load() }

// Dual reports whether the connection is initialized as a legacy one and
// takes requests sent with GoModern in 2026-07-28: a remote server of
// EraDual (over stdio such a server's connection is Modern).
func (c *Conn) Dual() bool { return c.dual.Load() }

// GoModern is Go for a request of a 2026-07-28 client: to a dual remote
// server it goes in that era (the _meta of withMeta, a request of its own
// with the era's headers and no session), so that an InputRequiredResult
// comes back to the client and its retry reaches the server as sent. To
// any other server it is Go.
func (c *Conn) GoModern(ctx context.Context, method string, params json.RawMessage, owner any, deliver func(*jsonrpc.Message, error)) (*Call, error) {
	return c.goEra(ctx, c.modern.Load() || c.dual.Load(), method, params, noSpan, owner, deliver)
}

// GoWithout is Go for a request of a 2026-07-28 client to a server that
// does not speak that era: the members of that era's _meta (the
// request's protocol version, client capabilities, client info and log
// level, which the caller acts on itself) are left out of the object at
// params[meta], the request's _meta, as the message is written, and the
// rest of params is sent byte for byte. To a modern or dual server, which
// reads them, it is GoModern.
func (c *Conn) GoWithout(ctx context.Context, method string, params json.RawMessage, meta jsonrpc.Span, owner any, deliver func(*jsonrpc.Message, error)) (*Call, error) {
	if c.modern.Load() || c.dual.Load() {
		return c.GoModern(ctx, method, params, owner, deliver)
	}
	return c.goEra(ctx, false, method, params, meta, owner, deliver)
}

// modernRequestMeta are the members of a request's _meta that 2026-07-28
// defines (see GoWithout).
var modernRequestMeta = [4]string{metaProtocolVersion, metaClientCapabilities, metaClientInfo, metaLogLevel}

// modernCall reports whether the request id of a dual connection was sent
// with GoModern.
func (c *Conn) modernCall(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := c.pending[id]
	return call != nil && call.modern
}

// speaksLegacy reports whether versions, a server/discover result's
// supportedVersions, lists a version mcpgate initializes with.
func speaksLegacy(versions []string) bool {
	return slices.Contains(versions, ProtocolVersion)
}

// pingMethod is the request that checks the server is alive: ping, which
// 2026-07-28 has replaced with server/discover.
func (c *Conn) pingMethod() string {
	if c.modern.Load() {
		return "server/discover"
	}
	return "ping"
}

// discoverResult is the part of a server/discover result the gateway uses.
type discoverResult struct {
	SupportedVersions []string     `json:"supportedVersions"`
	Capabilities      Capabilities `json:"capabilities"`
	Instructions      string       `json:"instructions"`
	ServerInfo        *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Meta map[string]json.RawMessage `json:"_meta"`
}

// errProbeEnded is the handshake's error when the process ended during the
// server/discover probe: it crashed, or it is a legacy server that does
// not survive an unknown method; its restart, counted as after any crash,
// skips the probe.
var errProbeEnded = errors.New("ended during the server/discover probe")

// probe sends server/discover and reports the server's kind: EraModern
// when its result lists ModernProtocolVersion among supportedVersions,
// EraDual when it lists ProtocolVersion as well (the handshake goes on
// with initialize), EraLegacy otherwise. Any other outcome (an error response, garbage, no answer within
// probeBound) means legacy, and the handshake falls back to initialize;
// the process ending meanwhile gives errProbeEnded. A probe that times
// out is dropped without notifications/cancelled, which a legacy server
// would get before initialize.
func (c *Conn) probe(ctx context.Context) (Era, error) {
	bound := c.b.probeBound()
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	type reply struct {
		msg *jsonrpc.Message
		err error
	}
	ch := make(chan reply, 1)
	call, err := c.Go(pctx, "server/discover", c.metaParams(), nil, func(m *jsonrpc.Message, err error) { ch <- reply{m, err} })
	if err != nil {
		return EraLegacy, err
	}
	var r reply
	select {
	case r = <-ch:
	case <-pctx.Done():
		if c.take(call.ID) != nil {
			if c.remote != nil {
				c.remote.abandon(call.ID)
			}
			if ctx.Err() != nil {
				return EraLegacy, ctx.Err()
			}
			c.log.Info(fmt.Sprintf("backend %q did not answer server/discover within %s (half its timeout, at least health_timeout); using initialize", c.b.name, bound))
			return EraLegacy, nil
		}
		r = <-ch
	}
	switch {
	case r.err != nil && errors.Is(r.err, ErrGone):
		return EraLegacy, errProbeEnded
	case r.err != nil && c.ended():
		return EraLegacy, errProbeEnded
	case r.err != nil:
		c.log.Debug("server/discover failed; using initialize", "err", r.err)
		return EraLegacy, nil
	case r.msg.Error != nil:
		c.log.Debug("server/discover answered with an error; using initialize", "error", truncate(r.msg.Error, 200))
		return EraLegacy, nil
	}
	var res discoverResult
	if err := json.Unmarshal(r.msg.Result, &res); err != nil || !slices.Contains(res.SupportedVersions, ModernProtocolVersion) {
		c.log.Debug("server/discover answered without "+ModernProtocolVersion+"; using initialize", "result", truncate(r.msg.Result, 200))
		return EraLegacy, nil
	}
	info := &ServerInfo{ProtocolVersion: ModernProtocolVersion, Instructions: res.Instructions, Capabilities: res.Capabilities}
	if raw := res.Meta[metaServerInfo]; raw != nil {
		var si struct{ Name, Version string }
		if json.Unmarshal(raw, &si) == nil {
			info.Name, info.Version = si.Name, si.Version
		}
	} else if res.ServerInfo != nil {
		info.Name, info.Version = res.ServerInfo.Name, res.ServerInfo.Version
	}
	if speaksLegacy(res.SupportedVersions) {
		info.Dual = true
		c.server.Store(info)
		if c.remote != nil {
			c.log.Debug("server/discover lists "+ModernProtocolVersion+" and "+ProtocolVersion+": initialized, and used per request in either era", "versions", res.SupportedVersions)
		} else {
			c.log.Debug("server/discover lists "+ModernProtocolVersion+" and "+ProtocolVersion+": over stdio the probe picked "+ModernProtocolVersion+" for every client", "versions", res.SupportedVersions)
		}
		return EraDual, nil
	}
	c.server.Store(info)
	c.modern.Store(true)
	return EraModern, nil
}

// probeBound is how long the server/discover probe waits: half the
// backend's timeout, which the whole handshake has, so that initialize
// still has the other half, and at least health_timeout. A server still
// starting (npx fetching a package) answers late, not never; one that
// ignores requests it does not know costs that much of its start.
func (b *Backend) probeBound() time.Duration {
	return max(b.cfg.Timeout/2, b.cfg.HealthTimeout, time.Second)
}

// modernHandshake is the handshake of a modern server after its probe:
// a subscription to the list changes it announces, acknowledged (or
// refused) before the first fetch of every list it declared, so that no
// change falls between the two.
func (c *Conn) modernHandshake(ctx context.Context) (*Lists, error) {
	c.subscribe()
	c.awaitAcknowledged(ctx)
	c.lists.dirty.Store(0)
	lists, err := c.fetch(ctx, listAll, &Lists{})
	if err != nil {
		return nil, err
	}
	go c.lists.run()
	return lists, nil
}

// metaParams is the params of a request with nothing but the _meta every
// request to a modern server carries: the version, the client
// capabilities mcpgate can relay (those it declares in initialize) and
// mcpgate itself.
func (c *Conn) metaParams() json.RawMessage {
	out := append([]byte(`{"_meta":`), c.meta().object...)
	return append(out, '}')
}

// withMeta returns params with the _meta of a modern request: the protocol
// version always mcpgate's, the client capabilities and info where the
// caller (the gateway, for a client it serves) did not set them already.
// The rest of params is kept byte for byte.
func (c *Conn) withMeta(params json.RawMessage) (json.RawMessage, error) {
	m := c.meta()
	meta, span, err := jsonrpc.Find(params, "_meta")
	if err != nil {
		return nil, fmt.Errorf("cannot add the 2026-07-28 _meta: %w", err)
	}
	switch {
	case meta == nil:
		return jsonrpc.PrependMembers(params, m.member)
	case string(meta) == "null":
		return jsonrpc.Replace(params, span, m.object), nil
	}
	var have [3]json.RawMessage
	if err := jsonrpc.FindEach(meta, metaKeys[:], have[:]); err != nil {
		return nil, fmt.Errorf("cannot add the 2026-07-28 _meta: %w", err)
	}
	if have[0] != nil {
		// The caller's version (a client's) gives way to mcpgate's.
		_, vspan, _ := jsonrpc.Find(meta, metaProtocolVersion)
		meta = jsonrpc.Replace(meta, vspan, []byte(`"`+ModernProtocolVersion+`"`))
	}
	var add []byte
	for i, member := range [3][]byte{m.version, m.caps, m.info} {
		if have[i] == nil {
			if len(add) > 0 {
				add = append(add, ',')
			}
			add = append(add, member...)
		}
	}
	if add != nil {
		if meta, err = jsonrpc.PrependMembers(meta, add); err != nil {
			return nil, fmt.Errorf("cannot add the 2026-07-28 _meta: %w", err)
		}
	}
	return jsonrpc.Replace(params, span, meta), nil
}

// metaKeys are the members withMeta sets, in the order of modernMeta's.
var metaKeys = [3]string{metaProtocolVersion, metaClientCapabilities, metaClientInfo}

// modernMeta is the _meta of a modern connection's requests, made once.
type modernMeta struct {
	version, caps, info []byte // one "key":value member each
	member              []byte // "_meta":{all three}
	object              []byte // {all three}
}

// meta returns the connection's modernMeta, making it on first use.
func (c *Conn) meta() *modernMeta {
	if m := c.metaCache.Load(); m != nil {
		return m
	}
	m := &modernMeta{
		version: []byte(`"` + metaProtocolVersion + `":"` + ModernProtocolVersion + `"`),
		caps:    append([]byte(`"`+metaClientCapabilities+`":`), c.b.relayCapabilities()...),
		info:    append([]byte(`"`+metaClientInfo+`":`), c.b.clientInfo()...),
	}
	m.object = append([]byte{'{'}, m.version...)
	m.object = append(append(m.object, ','), m.caps...)
	m.object = append(append(m.object, ','), m.info...)
	m.object = append(m.object, '}')
	m.member = append([]byte(`"_meta":`), m.object...)
	c.metaCache.Store(m)
	return m
}

// relayCapabilities is the client capabilities mcpgate declares to its
// backends: those of client_capabilities that it can relay to its clients
// or answer itself (config.Backend.Declared). roots has listChanged when
// they come from clients, whose lists change; configured roots do not.
func (b *Backend) relayCapabilities() []byte {
	c := b.cfg.Declared()
	out := []byte{'{'}
	add := func(member string) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, member...)
	}
	switch {
	case c.Roots && len(b.cfg.Roots) > 0:
		add(`"roots":{"listChanged":false}`)
	case c.Roots:
		add(`"roots":{"listChanged":true}`)
	}
	if c.Sampling {
		add(`"sampling":{}`)
	}
	if c.Elicitation {
		add(`"elicitation":{"form":{},"url":{}}`)
	}
	return append(out, '}')
}

// clientInfo is mcpgate as a client: {"name":"mcpgate","version":…}.
func (b *Backend) clientInfo() []byte {
	out := append([]byte(nil), `{"name":"mcpgate","version":`...)
	out = jsonrpc.AppendString(out, b.opts.Version)
	return append(out, '}')
}

// CachedEra is the era and protocol version of the server whose catalog
// cache is at path (see Options.CatalogCache) as of its last start, or
// EraUnknown without a readable cache.
func CachedEra(path string) (Era, string) {
	c, err := readCache(path)
	if c == nil || err != nil {
		return EraUnknown, ""
	}
	return c.server.Era(), c.server.ProtocolVersion
}
