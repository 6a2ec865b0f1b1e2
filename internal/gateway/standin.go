package gateway

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// standInSources lists, for each stopped or failed backend with fallbacks,
// the tools it served when it last ran that a healthy fallback has now:
// their calls go to the fallback (fallback.try), so clients keep seeing
// them. What integrity holds back of either stays held (and is added to
// held): a backend that fails is no way around the review. It also
// returns their exposed names by backend, for the status resources.
func (g *Gateway) standInSources(held map[string]bool) ([]catalog.Source, map[string][]string) {
	var sources []catalog.Source
	kept := map[string][]string{}
	for _, b := range g.registry.Backends() {
		cfg := b.Config()
		served := b.Served()
		if len(cfg.Fallback) == 0 || served == nil {
			continue
		}
		if st := b.State(); st != backend.Stopped && st != backend.Failed {
			continue
		}
		if _, server := b.Catalog(); server != nil {
			continue // listed as it is
		}
		served = g.integrityFilter(b, served, held)
		lists := &backend.Lists{}
		for _, raw := range served.Tools {
			if name, ok := toolName(raw); ok && g.fallbackHas(cfg.Fallback, name) {
				lists.Tools = append(lists.Tools, raw)
				kept[b.Name()] = append(kept[b.Name()], cfg.ToolPrefix+name)
			}
		}
		if len(lists.Tools) > 0 {
			sources = append(sources, catalog.Source{Backend: b.Name(), Prefix: cfg.ToolPrefix, Lists: lists})
		}
	}
	return sources, kept
}

// fallbackHas reports whether one of the fallbacks is healthy and has a
// tool of that (unprefixed) name, as fallback.try needs.
func (g *Gateway) fallbackHas(fallbacks []string, name string) bool {
	for _, fname := range fallbacks {
		fb := g.registry.Backend(fname)
		if fb == nil || fb.State() != backend.Healthy || fb.Lists() == nil {
			continue
		}
		for _, raw := range g.integrityFilter(fb, fb.Lists(), map[string]bool{}).Tools {
			if n, ok := toolName(raw); ok && n == name {
				return true
			}
		}
	}
	return false
}

// toolName returns the name member of a tools/list entry.
func toolName(raw json.RawMessage) (string, bool) {
	v, _, ok := jsonrpc.Lookup(raw, "name")
	if !ok {
		return "", false
	}
	return jsonrpc.StringValue(v)
}
