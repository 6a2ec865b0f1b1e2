package daemon

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// Profiles shows the endpoint and its profiles over D-Bus.
func (g *dbusGateway) Profiles() []dbusapi.ProfileStatus {
	var out []dbusapi.ProfileStatus
	for _, p := range g.d.gw.Profiles() {
		out = append(out, dbusapi.ProfileStatus{Name: p.Name, Description: p.Description, Search: p.Search,
			NTools: uint32(min(p.Tools, math.MaxUint32)), ListBytes: uint32(min(p.ListBytes, math.MaxUint32))})
	}
	return out
}

// profileChange says which profiles a reload added, removed or changed,
// for its journal entry: "profiles added ro; profiles removed old".
func profileChange(before, after map[string]*config.Profile) string {
	var added, removed, changed []string
	for name, p := range after {
		switch old, ok := before[name]; {
		case !ok:
			added = append(added, name)
		case !old.Equal(p):
			changed = append(changed, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			removed = append(removed, name)
		}
	}
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", added}, {"removed", removed}, {"changed", changed}} {
		if len(p.names) > 0 {
			slices.Sort(p.names)
			parts = append(parts, fmt.Sprintf("profiles %s %s", p.what, strings.Join(p.names, ", ")))
		}
	}
	return strings.Join(parts, "; ")
}
