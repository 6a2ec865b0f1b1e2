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
		s.followClient(c, cat)
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
		s.followClient(c, cat)
	})
}

// followClient makes the session follow its client's new definition, and
// tells it about lists that look different now.
func (s *Session) followClient(c *access.Client, cat *catalog.Catalog) {
	before := s.view()
	s.client.Store(c)
	after := s.view()
	for _, k := range []access.Kind{access.Tools, access.Prompts, access.Resources} {
		if s.viewDigest(before, k, cat) != s.viewDigest(after, k, cat) {
			s.listChanged(listChangedMethod[k])
		}
	}
	// A subscription to what the client may no longer read ends: it would
	// go on telling the client of updates to it.
	dropped := map[string]string{}
	s.mu.Lock()
	for uri, owner := range s.subs {
		if !after.resource(owner, uri) {
			dropped[uri] = owner
			delete(s.subs, uri)
		}
	}
	s.mu.Unlock()
	for uri, owner := range dropped {
		s.g.unsubscribe(owner, uri)
	}
}

var listChangedMethod = map[access.Kind]string{
	access.Tools:     "notifications/tools/list_changed",
	access.Prompts:   "notifications/prompts/list_changed",
	access.Resources: "notifications/resources/list_changed",
}

// Client returns the client the session belongs to.
func (s *Session) Client() *access.Client { return s.client.Load() }

// Identity returns who authenticated when the session began
// (access.Caller.Identity); only that identity may use it.
func (s *Session) Identity() string { return s.identity }

// who names the session's caller in a refusal's journal entry.
func (s *Session) who() access.Who {
	return access.Who{Client: s.Client().Name, Identity: s.identity, Session: s.ID, Request: s.RequestID()}
}

// sealedTo is what a requestState issued in the session is bound to: its
// client and its identity.
func (s *Session) sealedTo() string { return s.Client().Name + "\x00" + s.identity }

func (s *Session) policy() *access.Policy { return s.client.Load().Policy }

// allowsTool reports whether the session's client may call the tool the
// catalog exposes as name, as its policy and profile decide: once per view
// and catalog snapshot, not by walking the globs on every call.
func (s *Session) allowsTool(cat *catalog.Catalog, name string) bool {
	return s.view().tool(cat, name)
}

// viewDigest summarises what a view shows of one kind of list, so that
// list_changed reaches a client only when its own view changed.
func (s *Session) viewDigest(v view, k access.Kind, cat *catalog.Catalog) string {
	h := sha256.New()
	switch k {
	case access.Tools:
		for _, e := range s.listedTools(v, cat) {
			h.Write(e.Raw)
		}
	case access.Prompts:
		for _, e := range v.entries(cat, k, cat.Prompts) {
			h.Write(e.Raw)
		}
	case access.Resources:
		for _, r := range v.resources(cat.Resources) {
			h.Write(r.Raw)
		}
		h.Write([]byte{0})
		for _, r := range v.resources(cat.Templates) {
			h.Write(r.Raw)
		}
	}
	return string(h.Sum(nil))
}

// viewChanged reports whether the session's view of the list that method
// announces differs between two catalogs whose digests differ.
func (s *Session) viewChanged(prev, next *catalog.Catalog, method string) bool {
	v := s.view()
	if v.unrestricted() && !v.search {
		return true
	}
	for k, m := range listChangedMethod {
		if m == method {
			return s.viewDigest(v, k, prev) != s.viewDigest(v, k, next)
		}
	}
	return true
}

// audited wraps then so that the call is journaled when it ends: one entry
// per tools/call, prompts/get and resources/read, with who called what,
// how long it took, how it ended and how big it was, never the arguments
// or the result.
func (s *Session) audited(msg *jsonrpc.Message, stream *Stream, backend, what, name string) func(ok bool, size int) {
	if !s.g.opts.Audit || !s.g.log.Enabled(context.Background(), slog.LevelInfo) {
		return nil // nothing would be journaled: no work per call
	}
	start := time.Now()
	client := s.Client().Name
	ctx := context.Background()
	if op := s.op(msg, stream); op != nil {
		ctx = op.Context() // the entry names the request's span
	}
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
		upstream, subject := s.upstreamOf(backend)
		journal.WriteAudit(ctx, h, &journal.Audit{
			Time: now, Client: client, Identity: s.identity, Session: s.ID, RequestID: s.RequestID(), Backend: backend, What: what, Name: name,
			Method: msg.Method, Duration: now.Sub(start), Outcome: outcome,
			Request: len(msg.Params), Response: size, Upstream: upstream, UpstreamSubject: subject,
		})
	}
}

// hidden journals that the session's client called what its policy hides
// (what is "tool", "prompt" or "uri") in the request msg on stream, whose
// op then says refused and names none of it; the client itself gets the
// error of an unknown name.
func (s *Session) hidden(msg *jsonrpc.Message, stream *Stream, what string, k access.Kind, name string) {
	op := s.op(msg, stream)
	op.Refused()
	s.journalHidden(op.Context(), msg.Method, what, k, name)
}

// journalHidden is hidden's journal entry, of a call in ctx's trace.
func (s *Session) journalHidden(ctx context.Context, method, what string, k access.Kind, name string) {
	if r := s.g.opts.Refusals; r != nil {
		r.Hidden(ctx, s.who(), method, what, name, s.view().rule(k, name))
	}
}

// ambiguous journals, rate-limited, that the session's client sent a
// message with an ambiguous member (see checkDecided).
func (s *Session) ambiguous(method string, err error) {
	if r := s.g.opts.Refusals; r != nil {
		r.Ambiguous(context.Background(), s.who(), method, err)
	}
}

// unknownToolFor is unknownTool with suggestions only among the tools the
// session's client may see.
func (s *Session) unknownToolFor(cat *catalog.Catalog, name string) error {
	v := s.view()
	if v.unrestricted() {
		return unknownTool(cat, name)
	}
	msg := "unknown tool " + strconv.Quote(name)
	var near []string
	for _, n := range cat.Closest(name, 50) {
		if v.tool(cat, n) && len(near) < 3 {
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
	v := s.view()
	if v.unrestricted() {
		return true
	}
	cat := s.g.Catalog()
	for _, e := range cat.Tools {
		if e.Backend == name && v.tool(cat, e.Name) {
			return true
		}
	}
	for _, e := range cat.Prompts {
		if e.Backend == name && v.prompt(cat, e.Name) {
			return true
		}
	}
	for _, list := range [][]catalog.Resource{cat.Resources, cat.Templates} {
		for _, r := range list {
			if r.Backend == name && v.resource(r.Backend, r.URI) {
				return true
			}
		}
	}
	return false
}
