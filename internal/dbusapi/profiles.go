package dbusapi

import (
	"context"

	"github.com/godbus/dbus/v5"
)

// ProfileStatus is one element of ListProfiles' a(ssbuu): the endpoint
// itself (Name "") or one of its profiles, as a client without a policy
// of its own sees it.
type ProfileStatus struct {
	Name        string `json:"name"` // "" for the endpoint itself
	Description string `json:"description"`
	Search      bool   `json:"search"` // served in search mode
	// NTools is how many tools it serves: listed, or found in search mode.
	NTools uint32 `json:"tools"`
	// ListBytes is the size of its tools/list result.
	ListBytes uint32 `json:"list_bytes"`
}

// ProfilesGateway is a Gateway with profiles ([profiles.NAME]).
// ListProfiles answers with the endpoint alone on a Gateway that does not
// implement it.
type ProfilesGateway interface {
	// Profiles returns the endpoint itself, then each profile by name.
	Profiles() []ProfileStatus
}

// profileRow is one element of ListProfiles' a(ssbuu).
type profileRow struct {
	Name, Description string
	Search            bool
	NTools, ListBytes uint32
}

// ListProfiles returns the endpoint itself and every configured profile:
// its name ("" for the endpoint), description, whether it is served in
// search mode, how many tools it serves, and the bytes of its tools/list.
// Reading is open, as ListTools is.
func (m managerObject) ListProfiles() ([]profileRow, *dbus.Error) {
	pg, ok := m.s.gw.(ProfilesGateway)
	if !ok {
		return []profileRow{{NTools: uint32(len(m.s.gw.Tools()))}}, nil
	}
	rows := []profileRow{}
	for _, p := range pg.Profiles() {
		rows = append(rows, profileRow(p))
	}
	return rows, nil
}

// ListProfiles returns the gateway's endpoint and profiles.
func (c *Client) ListProfiles(ctx context.Context) ([]ProfileStatus, error) {
	var rows []profileRow
	if err := c.call(ctx, ManagerPath, ManagerInterface+".ListProfiles", 0, nil, &rows); err != nil {
		return nil, err
	}
	out := make([]ProfileStatus, len(rows))
	for i, r := range rows {
		out[i] = ProfileStatus(r)
	}
	return out, nil
}
