package gateway

import (
	"sync"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/toolsearch"
)

// profileState is what the gateway keeps for profiles and search mode:
// the configured profiles, and the search index of the current catalog.
type profileState struct {
	profiles atomic.Pointer[profiles]

	indexMu    sync.Mutex // serialises building the index
	indexed    *catalog.Catalog
	index      *toolsearch.Index
	indexBuilt atomic.Int64 // how many indexes were built, for tests
}

// toolIndex returns the search index of cat's tools: built at the first
// search after the catalog changed, and kept for the current catalog only,
// so the index follows backends as they come, go and change.
func (g *Gateway) toolIndex(cat *catalog.Catalog) *toolsearch.Index {
	g.indexMu.Lock()
	defer g.indexMu.Unlock()
	if g.indexed == cat {
		return g.index
	}
	docs := make([]toolsearch.Doc, len(cat.Tools))
	for i := range cat.Tools {
		docs[i] = toolsearch.ParseTool(cat.Tools[i].Raw)
	}
	x := toolsearch.New(docs)
	g.indexBuilt.Add(1)
	if cat == g.Catalog() { // an older snapshot's index would not be asked for again
		g.indexed, g.index = cat, x
	}
	return x
}
