package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// clientSessions counts the open sessions of each client, for max_sessions.
type clientSessions struct {
	mu sync.Mutex
	n  map[string]int
}

// admit counts a new session of c, or refuses it beyond c's max_sessions.
func (g *Gateway) admit(c *access.Client) error {
	cs := &g.perClient
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.n == nil {
		cs.n = map[string]int{}
	}
	if c.MaxSessions > 0 && cs.n[c.Name] >= c.MaxSessions {
		return &access.LimitError{Client: c.Name, What: "max_sessions", Limit: strconv.Itoa(c.MaxSessions), RetryAfter: time.Minute}
	}
	cs.n[c.Name]++
	g.sessionsChanged()
	return nil
}

// release forgets a session of the named client.
func (g *Gateway) release(name string) {
	cs := &g.perClient
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.n[name]--; cs.n[name] <= 0 {
		delete(cs.n, name)
	}
	g.sessionsChanged()
}

// sessionsChanged calls OnSessions; cs.mu is held, so calls come in the
// order of the counts.
func (g *Gateway) sessionsChanged() {
	if g.opts.OnSessions != nil {
		g.opts.OnSessions()
	}
}

// SessionsByClient returns the number of open sessions of each client
// that has one.
func (g *Gateway) SessionsByClient() map[string]int {
	cs := &g.perClient
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make(map[string]int, len(cs.n))
	for name, n := range cs.n {
		out[name] = n
	}
	return out
}

// SetClients applies a new set of clients to the open sessions: a session
// whose client is gone ends; the others follow their client's new policy,
// and are told about lists that look different now.
func (g *Gateway) SetClients(set *access.Set) {
	cat := g.Catalog()
	g.setListenerClients(set, cat)
	g.eachSession(func(s *Session) {
		old := s.Client()
		c := set.Client(old.Name)
		if c == nil {
			g.log.Info(fmt.Sprintf("ending a session of client %q, which was removed", old.Name), "session", s.ID, "client", old.Name)
			g.CloseSession(s.ID, "client \""+old.Name+"\" was removed from the configuration")
			return
		}
		s.client.Store(c)
		for _, k := range []access.Kind{access.Tools, access.Prompts, access.Resources} {
			if viewDigest(old.Policy, k, cat) != viewDigest(c.Policy, k, cat) {
				s.listChanged(listChangedMethod[k])
			}
		}
	})
}

// setListenerClients is SetClients for subscriptions/listen streams: one
// whose client is gone ends.
func (g *Gateway) setListenerClients(set *access.Set, cat *catalog.Catalog) {
	g.eachListener(func(s *Session) {
		old := s.Client()
		c := set.Client(old.Name)
		if c == nil {
			s.endListener("client \"" + old.Name + "\" was removed from the configuration")
			return
		}
		s.client.Store(c)
		for _, k := range []access.Kind{access.Tools, access.Prompts, access.Resources} {
			if viewDigest(old.Policy, k, cat) != viewDigest(c.Policy, k, cat) {
				s.listChanged(listChangedMethod[k])
			}
		}
	})
}

var listChangedMethod = map[access.Kind]string{
	access.Tools:     "notifications/tools/list_changed",
	access.Prompts:   "notifications/prompts/list_changed",
	access.Resources: "notifications/resources/list_changed",
}

// Client returns the client the session belongs to.
func (s *Session) Client() *access.Client { return s.client.Load() }

func (s *Session) policy() *access.Policy { return s.client.Load().Policy }

// allowsTool reports whether the session's client may call the tool the
// catalog exposes as name: decided once per policy and catalog snapshot,
// not by walking the policy's globs on every call.
func (s *Session) allowsTool(cat *catalog.Catalog, name string) bool {
	p := s.policy()
	if p.Unrestricted() {
		return true
	}
	return cat.DecideTool(p, name, func(name string) bool { return p.Allows(access.Tools, name) })
}

// visibleEntries returns the entries of list the session's client may see:
// list itself when nothing is hidden.
func visibleEntries(p *access.Policy, k access.Kind, list []catalog.Entry) []catalog.Entry {
	if p.Unrestricted() {
		return list
	}
	out := make([]catalog.Entry, 0, len(list))
	for _, e := range list {
		if p.Allows(k, e.Name) {
			out = append(out, e)
		}
	}
	return out
}

// visibleResources is visibleEntries for resources and templates, by URI.
func visibleResources(p *access.Policy, list []catalog.Resource) []catalog.Resource {
	if p.Unrestricted() {
		return list
	}
	out := make([]catalog.Resource, 0, len(list))
	for _, r := range list {
		if p.Allows(access.Resources, r.URI) {
			out = append(out, r)
		}
	}
	return out
}

// viewDigest summarises what a policy shows of one kind of list, so that
// list_changed reaches a client only when its own view changed.
func viewDigest(p *access.Policy, k access.Kind, cat *catalog.Catalog) string {
	h := sha256.New()
	switch k {
	case access.Tools:
		for _, e := range visibleEntries(p, k, cat.Tools) {
			h.Write(e.Raw)
		}
	case access.Prompts:
		for _, e := range visibleEntries(p, k, cat.Prompts) {
			h.Write(e.Raw)
		}
	case access.Resources:
		for _, r := range visibleResources(p, cat.Resources) {
			h.Write(r.Raw)
		}
		h.Write([]byte{0})
		for _, r := range visibleResources(p, cat.Templates) {
			h.Write(r.Raw)
		}
	}
	return string(h.Sum(nil))
}

// viewChanged reports whether the session's view of the list that method
// announces differs between two catalogs whose digests differ.
func (s *Session) viewChanged(prev, next *catalog.Catalog, method string) bool {
	p := s.policy()
	if p.Unrestricted() {
		return true
	}
	for k, m := range listChangedMethod {
		if m == method {
			return viewDigest(p, k, prev) != viewDigest(p, k, next)
		}
	}
	return true
}

// audited wraps then so that the call is journaled when it ends: one entry
// per tools/call, prompts/get and resources/read, with who called what,
// how long it took, how it ended and how big it was, never the arguments
// or the result.
func (s *Session) audited(msg *jsonrpc.Message, backend, what, name string) func(ok bool, size int) {
	if !s.g.opts.Audit || !s.g.log.Enabled(context.Background(), slog.LevelInfo) {
		return nil // nothing would be journaled: no work per call
	}
	start := time.Now()
	client := s.Client().Name
	return func(ok bool, size int) {
		outcome := "ok"
		switch {
		case !ok && size > 0:
			outcome = "error" // the backend answered with an error
		case !ok:
			outcome = "failed" // no answer: timeout, cancelled, backend gone
		}
		// The handler directly, as Logger.LogAttrs would call it, without
		// the caller's program counter: that stack walk would cost more
		// than the entry.
		h := s.g.log.Handler()
		if !h.Enabled(context.Background(), slog.LevelInfo) {
			return
		}
		now := time.Now()
		journal.WriteAudit(h, &journal.Audit{
			Time: now, Client: client, Session: s.ID, RequestID: s.RequestID(), Backend: backend, What: what, Name: name,
			Method: msg.Method, Duration: now.Sub(start), Outcome: outcome,
			Request: len(msg.Params), Response: size,
		})
	}
}

// hidden journals that the session's client called what its policy hides
// (what is "tool", "prompt" or "uri"); the client itself gets the error of
// an unknown name.
func (s *Session) hidden(method, what string, k access.Kind, name string) {
	if r := s.g.opts.Refusals; r != nil {
		r.Hidden(s.Client().Name, s.ID, method, what, name, s.policy().Rule(k, name))
	}
}

// ambiguous journals, rate-limited, that the session's client sent a
// message with an ambiguous member (see checkDecided).
func (s *Session) ambiguous(method string, err error) {
	if r := s.g.opts.Refusals; r != nil {
		r.Ambiguous(s.Client().Name, s.ID, method, err)
	}
}

// unknownToolFor is unknownTool with suggestions only among the tools the
// session's client may see.
func (s *Session) unknownToolFor(cat *catalog.Catalog, name string) error {
	p := s.policy()
	if p.Unrestricted() {
		return unknownTool(cat, name)
	}
	msg := "unknown tool " + strconv.Quote(name)
	var near []string
	for _, n := range cat.Closest(name, 50) {
		if p.Allows(access.Tools, n) && len(near) < 3 {
			near = append(near, n)
		}
	}
	if len(near) > 0 {
		msg += "; did you mean " + quoteList(near) + "?"
	}
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s", msg)
}

// seesBackend reports whether the session's client may see anything of
// the named backend: messages a backend broadcasts (log messages, unknown
// notifications) reach only clients for which it exists.
func (s *Session) seesBackend(name string) bool {
	p := s.policy()
	if p.Unrestricted() {
		return true
	}
	cat := s.g.Catalog()
	entries := func(k access.Kind, list []catalog.Entry) bool {
		for _, e := range list {
			if e.Backend == name && p.Allows(k, e.Name) {
				return true
			}
		}
		return false
	}
	if entries(access.Tools, cat.Tools) || entries(access.Prompts, cat.Prompts) {
		return true
	}
	for _, list := range [][]catalog.Resource{cat.Resources, cat.Templates} {
		for _, r := range list {
			if r.Backend == name && p.Allows(access.Resources, r.URI) {
				return true
			}
		}
	}
	return false
}
