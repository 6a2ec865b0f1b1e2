package gateway

import "github.com/mcpgate/mcpgate/internal/config"

// settings are the parts of the configuration the gateway applies itself,
// swapped whole on reload: output pipeline settings, composite tools and
// the ttlMs of lists.
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
	g.modern.listTTL.Store(listTTL(cfg))
}

// listTTL is the ttlMs of the gateway's lists, in ms: the least list_ttl
// of the enabled backends, as each can change the merged lists; 0
// without any.
func listTTL(cfg *config.Config) int64 {
	least := int64(-1)
	for _, b := range cfg.EnabledBackends() {
		if ms := b.ListTTL.Milliseconds(); least < 0 || ms < least {
			least = ms
		}
	}
	return max(least, 0)
}
