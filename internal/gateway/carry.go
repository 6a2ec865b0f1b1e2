package gateway

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
)

// SessionState is what an in-place re-exec carries of a 2025-era session:
// enough for the next image to answer its Mcp-Session-Id as this one
// would, with the same client, profile, subscriptions and log level. Its
// calls in flight were answered before; its event streams are not carried
// (the client reconnects them).
type SessionState struct {
	ID       string            `json:"id"`
	Protocol string            `json:"protocol"`
	Caps     clientCaps        `json:"caps"`
	Offered  [3]bool           `json:"offered"` // tools, prompts, resources list_changed
	Client   string            `json:"client"`
	Identity string            `json:"identity"`
	Endpoint string            `json:"endpoint,omitempty"` // the profile the path named
	Added    []string          `json:"added,omitempty"`    // search mode's added tools
	LogLevel int               `json:"logLevel"`
	Subs     map[string]string `json:"subs,omitempty"` // uri → owning backend
}

// SessionStates returns the state of every session, for a re-exec. A
// session bound to instances of its own (instance = "session") is left
// out: its instances are not carried.
func (g *Gateway) SessionStates() []SessionState {
	var out []SessionState
	g.eachSession(func(s *Session) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed || len(s.instances) > 0 {
			return
		}
		out = append(out, SessionState{
			ID: s.ID, Protocol: s.Protocol, Caps: s.caps,
			Offered: [3]bool{s.offered.tools, s.offered.prompts, s.offered.resources},
			Client:  s.Client().Name, Identity: s.identity, Endpoint: s.endpoint,
			Added: slices.Clone(s.added), LogLevel: s.logLevel, Subs: maps.Clone(s.subs),
		})
	})
	return out
}

// RestoreSessions takes over the sessions a previous image carried,
// bound to the clients of set: each answers its Mcp-Session-Id from now
// on. A session whose client or profile is no longer configured, or that
// the limits refuse, is dropped and named in the error; its client's next
// request gets 404 and it initializes again.
func (g *Gateway) RestoreSessions(states []SessionState, set *access.Set) (restored int, err error) {
	var dropped []string
	for _, st := range states {
		if why := g.restore(st, set); why != "" {
			dropped = append(dropped, fmt.Sprintf("%s of client %q: %s", SessionHash(st.ID), st.Client, why))
			continue
		}
		restored++
	}
	if len(dropped) > 0 {
		return restored, fmt.Errorf("%d sessions not taken over: %v", len(dropped), dropped)
	}
	return restored, nil
}

// restore is RestoreSessions for one session; it returns why it was not
// taken over, or "".
func (g *Gateway) restore(st SessionState, set *access.Set) string {
	client := set.Client(st.Client)
	if client == nil && set == nil && st.Client == access.Anonymous().Name {
		client = access.Anonymous()
	}
	if client == nil {
		return "the client is no longer configured"
	}
	s := &Session{
		ID: st.ID, Protocol: st.Protocol, g: g, caps: st.Caps,
		offered:    offeredCaps{tools: st.Offered[0], prompts: st.Offered[1], resources: st.Offered[2]},
		lastActive: time.Now(), logLevel: st.LogLevel, identity: st.Identity,
	}
	s.standalone = newStream(0, true, g.opts.MaxStreamEvents)
	s.client.Store(client)
	s.endpoint = st.Endpoint
	shown, ok := s.resolveProfile(g.profileSet())
	if !ok {
		return fmt.Sprintf("its profile %q is no longer configured", s.profileName())
	}
	s.profile.Store(shown)
	s.added = st.Added
	if n := g.nsess.Add(1); g.opts.MaxSessions > 0 && n > int64(g.opts.MaxSessions) {
		g.nsess.Add(-1)
		return "max_sessions reached"
	}
	if err := g.admit(client); err != nil {
		g.nsess.Add(-1)
		return err.Error()
	}
	if len(st.Subs) > 0 {
		s.subs = maps.Clone(st.Subs)
		g.subsMu.Lock()
		for uri, owner := range st.Subs {
			g.subs[subKey{owner, uri}]++
		}
		g.subsMu.Unlock()
	}
	g.sessions.Store(s.ID, s)
	return ""
}
