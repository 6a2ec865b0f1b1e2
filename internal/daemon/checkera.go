package daemon

import (
	"fmt"
	"io"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
)

// printEras is --check-config's word on the era of each enabled backend
// (see Era in mcpgate-dbus(7)): what can be known without starting it.
// The era of a server is learned at every start; an on-demand backend's
// catalog cache tells the era of its last one.
func printEras(w io.Writer, cfg *config.Config) {
	for _, b := range cfg.EnabledBackends() {
		var era string
		switch {
		case b.Transport == "cli":
			era = "none: transport \"cli\" runs programs, not an MCP server"
		case b.Transport == "sse":
			era = "legacy: transport \"sse\" predates server/discover"
		case b.Era == config.EraLegacy:
			era = "legacy: era = \"legacy\", initialized without server/discover"
		default:
			era = "probed with server/discover at every start"
			if b.OnDemand() || b.IdleStop > 0 {
				if e, v := backend.CachedEra(catalogCachePath(b.Name)); e != backend.EraUnknown {
					era += fmt.Sprintf("; %s (%s) at its last start", e, v)
				}
			}
		}
		fmt.Fprintf(w, "  backend %s: era %s\n", b.Name, era)
	}
}
