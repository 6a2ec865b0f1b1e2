package gateway

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/access"
)

// CardTool is a tool as a server card lists it: what a person reads to
// tell what the endpoint offers, without its schemas.
type CardTool struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// CardTools returns the tools tools/list serves at the endpoint of
// profile ("" for the endpoint itself) to client, as its policy and the
// profile (at the endpoint itself, the client's default profile) narrow
// them, in search mode the meta-tools; with a nil client, every tool the
// profile serves, for an operator who publishes them. ok is false when no
// such profile is configured.
func (g *Gateway) CardTools(client *access.Client, profile string) (tools []CardTool, ok bool) {
	if profile != "" && !g.HasProfile(profile) {
		return nil, false
	}
	if client == nil {
		client = access.Anonymous() // every tool: what the operator published
	}
	s := &Session{g: g, shape: shape{endpoint: profile}}
	s.client.Store(client)
	p, found := s.resolveProfile(g.profileSet())
	if !found {
		return nil, true // a default profile not there: nothing, never the whole catalog
	}
	s.profile.Store(p)
	cat := g.Catalog()
	for _, e := range s.listedTools(s.view(), cat) {
		t := CardTool{Name: e.Name, Description: e.Description}
		var fields struct {
			Title string `json:"title"`
		}
		if json.Unmarshal(e.Raw, &fields) == nil {
			t.Title = fields.Title
		}
		tools = append(tools, t)
	}
	return tools, true
}
