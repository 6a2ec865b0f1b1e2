package daemon

import (
	"math"

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
