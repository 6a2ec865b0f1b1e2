package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Profile is a named selection of the catalog (a [profiles.NAME] table):
// the tools, prompts and resources of the backends it names, by pattern
// and by tool annotations. A session sees what both its profile and its
// client's policy allow.
type Profile struct {
	Name string
	cfg  *config.Profile
	// names holds the profile's tool, resource and prompt patterns, with
	// a policy's semantics; backends its backend patterns, as tools.
	names, backends *access.Policy
	annotations     map[string]bool
}

func newProfile(c *config.Profile) *Profile {
	return &Profile{
		Name:        c.Name,
		cfg:         c,
		names:       access.NewPolicy(c.Tools, c.Resources, c.Prompts),
		backends:    access.NewPolicy(c.Backends, nil, nil),
		annotations: c.Annotations,
	}
}

// Search reports whether the profile is served in search mode.
func (p *Profile) Search() bool { return p != nil && p.cfg.Search }

// Description is the profile's description, for status.
func (p *Profile) Description() string { return p.cfg.Description }

// maxAdded bounds the tools a search-mode session adds to its list.
func (p *Profile) maxAdded() int {
	if p == nil {
		return config.DefaultMaxAddedTools
	}
	return p.cfg.MaxAddedTools
}

// ownedBy reports whether the profile takes what the named backend owns.
func (p *Profile) ownedBy(backend string) bool {
	return p == nil || p.backends.Unrestricted() || p.backends.Allows(access.Tools, backend)
}

// selectsTool reports whether the profile selects the tool e.
func (p *Profile) selectsTool(e *catalog.Entry) bool {
	if p == nil {
		return true
	}
	return p.ownedBy(e.Backend) && p.names.Allows(access.Tools, e.Name) && p.hasAnnotations(e.Raw)
}

// selectsPrompt reports whether the profile selects the prompt e.
func (p *Profile) selectsPrompt(e *catalog.Entry) bool {
	return p == nil || p.ownedBy(e.Backend) && p.names.Allows(access.Prompts, e.Name)
}

// selectsResource reports whether the profile selects the resource (or
// template) uri of the named owner.
func (p *Profile) selectsResource(owner, uri string) bool {
	return p == nil || p.ownedBy(owner) && p.names.Allows(access.Resources, uri)
}

// hasAnnotations reports whether a tool's definition has the annotations
// the profile asks for; one it does not state has MCP's default, and one
// stated twice or as something else than a boolean counts as unmet.
func (p *Profile) hasAnnotations(raw json.RawMessage) bool {
	if len(p.annotations) == 0 {
		return true
	}
	ann, _, err := jsonrpc.Find(raw, "annotations")
	if err != nil {
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(p.annotations)) {
		want := p.annotations[k]
		got := config.ToolAnnotations[k]
		if ann != nil {
			v, _, err := jsonrpc.Find(ann, k)
			switch {
			case err != nil:
				return false
			case string(v) == "true":
				got = true
			case string(v) == "false":
				got = false
			case v != nil:
				return false
			}
		}
		if got != want {
			return false
		}
	}
	return true
}

// profiles are the configured profiles, by name; replaced whole.
type profiles map[string]*Profile

// setProfiles applies the configured profiles: each session follows its
// profile's new definition and is told about lists that look different
// now; a session started at the path of a profile that is gone ends.
func (g *Gateway) setProfiles(cfg map[string]*config.Profile) {
	next := profiles{}
	old := g.profileSet()
	for name, c := range cfg {
		if p := old[name]; p != nil && p.cfg.Equal(c) {
			next[name] = p // unchanged: memos keyed by it stay good
			continue
		}
		next[name] = newProfile(c)
	}
	g.profiles.Store(&next)
	cat := g.Catalog()
	update := func(s *Session, end func(why string)) {
		before := s.view()
		p, ok := s.resolveProfile(next)
		if !ok {
			end(fmt.Sprintf("profile %q was removed from the configuration", s.profileName()))
			return
		}
		s.profile.Store(p)
		after := s.view()
		for _, k := range []access.Kind{access.Tools, access.Prompts, access.Resources} {
			if s.viewDigest(before, k, cat) != s.viewDigest(after, k, cat) {
				s.listChanged(listChangedMethod[k])
			}
		}
	}
	g.eachSession(func(s *Session) {
		update(s, func(why string) {
			g.log.Info(fmt.Sprintf("ending a session of client %q: %s", s.Client().Name, why), "session", s.ID, "client", s.Client().Name)
			g.CloseSession(s.ID, why)
		})
	})
	g.eachListener(func(s *Session) { update(s, s.endListener) })
}

func (g *Gateway) profileSet() profiles {
	if p := g.profiles.Load(); p != nil {
		return *p
	}
	return nil
}

// HasProfile reports whether a profile of that name is configured.
func (g *Gateway) HasProfile(name string) bool { return g.profileSet()[name] != nil }

// ProfileNames returns the configured profiles' names, sorted.
func (g *Gateway) ProfileNames() []string { return slices.Sorted(maps.Keys(g.profileSet())) }

// shape is what a session is shown besides its client's policy: the
// profile it was started with, and in search mode the tools it added to
// its list.
type shape struct {
	// endpoint is the profile the path named, "" at the endpoint itself
	// (where the client's own profile applies).
	endpoint string
	profile  atomic.Pointer[Profile] // nil: the whole catalog
	added    []string                // added tools, in order; guarded by Session.mu
}

// profileName is the name of the profile the session is to see: the
// endpoint's, else its client's default; "" for none.
func (s *Session) profileName() string {
	if s.endpoint != "" {
		return s.endpoint
	}
	if c := s.Client().Config(); c != nil {
		return c.Profile
	}
	return ""
}

// resolveProfile finds the session's profile in set. It reports false
// when set lacks it (the endpoint's was removed; or, while a reload
// applies its parts one after the other, a client's new default is not
// there yet): never the whole catalog in its place.
func (s *Session) resolveProfile(set profiles) (*Profile, bool) {
	name := s.profileName()
	if name == "" {
		return nil, true
	}
	p := set[name]
	return p, p != nil
}

// Profile returns the name of the session's profile, "" for none.
func (s *Session) Profile() string {
	if p := s.profile.Load(); p != nil {
		return p.Name
	}
	return ""
}

// Endpoint returns the profile named by the path the session started at,
// "" for the endpoint itself: requests of the session must come there.
func (s *Session) Endpoint() string { return s.endpoint }

// view is what a session is shown: its client's policy, narrowed by its
// profile, as one search mode or the whole list.
type view struct {
	policy  *access.Policy
	profile *Profile
	search  bool
}

// view returns the session's current view.
func (s *Session) view() view {
	c := s.Client()
	p := s.profile.Load()
	return view{policy: c.Policy, profile: p, search: p.Search() || c.Config() != nil && c.Config().Search}
}

// unrestricted reports whether the view shows everything.
func (v view) unrestricted() bool { return v.profile == nil && v.policy.Unrestricted() }

// viewKey is what decisions about a view's tools are remembered by.
type viewKey struct {
	policy  *access.Policy
	profile *Profile
}

// tool reports whether the view shows the tool exposed as name: decided
// once per view and catalog snapshot (see catalog.DecideTool).
func (v view) tool(cat *catalog.Catalog, name string) bool {
	if v.unrestricted() {
		return true
	}
	if v.profile == nil {
		return cat.DecideTool(v.policy, name, func(name string) bool { return v.policy.Allows(access.Tools, name) })
	}
	return cat.DecideTool(viewKey{v.policy, v.profile}, name, func(name string) bool {
		e, ok := cat.Tool(name)
		return ok && v.policy.Allows(access.Tools, name) && v.profile.selectsTool(e)
	})
}

// prompt reports whether the view shows the prompt exposed as name.
func (v view) prompt(cat *catalog.Catalog, name string) bool {
	if !v.policy.Allows(access.Prompts, name) {
		return false
	}
	if v.profile == nil {
		return true
	}
	e, ok := cat.Prompt(name)
	return ok && v.profile.selectsPrompt(e)
}

// resource reports whether the view shows the resource uri of owner.
func (v view) resource(owner, uri string) bool {
	return v.policy.Allows(access.Resources, uri) && v.profile.selectsResource(owner, uri)
}

// entries returns the tools or prompts of list the view shows: list
// itself when it shows everything.
func (v view) entries(cat *catalog.Catalog, k access.Kind, list []catalog.Entry) []catalog.Entry {
	if v.unrestricted() {
		return list
	}
	out := make([]catalog.Entry, 0, len(list))
	for i := range list {
		e := &list[i]
		if k == access.Tools && v.tool(cat, e.Name) || k == access.Prompts && v.prompt(cat, e.Name) {
			out = append(out, *e)
		}
	}
	return out
}

// resources returns the resources or templates of list the view shows.
func (v view) resources(list []catalog.Resource) []catalog.Resource {
	if v.unrestricted() {
		return list
	}
	out := make([]catalog.Resource, 0, len(list))
	for _, r := range list {
		if v.resource(r.Backend, r.URI) {
			out = append(out, r)
		}
	}
	return out
}

// rule says why the view hides name, for the journal: the policy's rule,
// or the profile's.
func (v view) rule(k access.Kind, name string) string {
	if !v.policy.Allows(k, name) || v.profile == nil {
		return v.policy.Rule(k, name)
	}
	return fmt.Sprintf("profile %q does not select it", v.profile.Name)
}
