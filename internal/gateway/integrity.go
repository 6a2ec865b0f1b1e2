package gateway

import (
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Integrity holds back what a backend offers until an operator approved
// it (package integrity implements it). Held-back items are not in the
// catalog, so no client lists them, a call gets the error of an unknown
// tool, and no fallback serves them.
type Integrity interface {
	// Filter returns what of lists backend may show clients, and the
	// names (at the backend) of the tools it holds back.
	Filter(backend string, lists *backend.Lists) (served *backend.Lists, heldTools []string)
	// NumPending returns how many changes of backend wait for review.
	NumPending(backend string) int
}

// integrityFilter passes a backend's lists through Options.Integrity and
// adds the exposed names of the tools it holds back to held.
func (g *Gateway) integrityFilter(b *backend.Backend, lists *backend.Lists, held map[string]bool) *backend.Lists {
	if g.opts.Integrity == nil {
		return lists
	}
	served, heldTools := g.opts.Integrity.Filter(b.Name(), lists)
	for _, name := range heldTools {
		held[catalog.ExposedName(b.Config().ToolPrefix, name)] = true
	}
	return served
}

// withoutHeldComposites drops from src the composites a step of which
// calls a held-back tool, or a composite dropped for that reason: a
// composite must not reach around the review of the tools it uses.
func (g *Gateway) withoutHeldComposites(src catalog.Source, held map[string]bool) catalog.Source {
	st := g.settings.Load()
	if len(held) == 0 || st == nil {
		return src
	}
	kept := src.Lists.Tools
	for dropped := true; dropped; {
		dropped = false
		next := kept[:0:0]
		for _, raw := range kept {
			nameRaw, _, _ := jsonrpc.Lookup(raw, "name")
			name, _ := jsonrpc.StringValue(nameRaw)
			uses := false
			if c := st.composites[name]; c != nil {
				for _, step := range c.Steps {
					uses = uses || held[step.Tool]
				}
			}
			if uses {
				held[catalog.ExposedName(src.Prefix, name)] = true
				dropped = true
				continue
			}
			next = append(next, raw)
		}
		kept = next
	}
	return catalog.Source{Backend: src.Backend, Prefix: src.Prefix, Lists: &backend.Lists{Tools: kept}}
}

// numPending returns how many changes of backend name wait for review.
func (g *Gateway) numPending(name string) int {
	if g.opts.Integrity == nil {
		return 0
	}
	return g.opts.Integrity.NumPending(name)
}
