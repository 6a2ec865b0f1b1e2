package gateway

import (
	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/catalog"
)

// ProfileStatus is what status shows of the endpoint or of one profile,
// for a client without a policy of its own.
type ProfileStatus struct {
	Name        string // "" for the endpoint itself: the whole catalog
	Description string
	Search      bool // served in search mode
	// Tools is how many tools it serves: listed, or in search mode found.
	Tools int
	// ListBytes is the size of its tools/list result: what a client's
	// context pays for the list.
	ListBytes int
}

// Profiles returns the endpoint itself and each configured profile, by
// name, as the current catalog makes them.
func (g *Gateway) Profiles() []ProfileStatus {
	cat := g.Catalog()
	set := g.profileSet()
	out := []ProfileStatus{g.profileStatus(cat, nil)}
	for _, name := range g.ProfileNames() {
		out = append(out, g.profileStatus(cat, set[name]))
	}
	return out
}

func (g *Gateway) profileStatus(cat *catalog.Catalog, p *Profile) ProfileStatus {
	s := &Session{g: g}
	s.profile.Store(p)
	v := view{policy: access.AllowAll(), profile: p, search: p.Search()}
	st := ProfileStatus{Search: v.search, Tools: len(v.entries(cat, access.Tools, cat.Tools))}
	if p != nil {
		st.Name, st.Description = p.Name, p.Description()
	}
	st.ListBytes = len(`{"tools":[]}`)
	for i, e := range s.listedTools(v, cat) {
		if i > 0 {
			st.ListBytes++
		}
		st.ListBytes += len(e.Raw)
	}
	return st
}
