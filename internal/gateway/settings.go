package gateway

import "github.com/mcpgate/mcpgate/internal/config"

// settings are the parts of the configuration the gateway applies itself,
// swapped whole on reload: output pipeline settings and composite tools.
type settings struct {
	backends        map[string]*config.Backend
	composites      map[string]*config.Composite
	compositePrefix string
	maxMessageBytes int64
}

// Configure applies the configuration's output pipeline settings and
// composite tools, at start and on every reload. Call Refresh afterwards
// to publish changed composites.
func (g *Gateway) Configure(cfg *config.Config) {
	g.settings.Store(&settings{backends: cfg.Backends, composites: cfg.Composites,
		compositePrefix: cfg.Gateway.CompositePrefix, maxMessageBytes: cfg.Gateway.MaxMessageBytes})
	g.setProfiles(cfg.Profiles)
}
