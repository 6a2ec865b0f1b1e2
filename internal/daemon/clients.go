package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// openIssued opens the store of tokens issued over D-Bus in the state
// directory. A store that cannot be read is logged and left closed: no
// issued token is trusted, and CreateToken says why.
func (d *daemon) openIssued() {
	issued, err := access.OpenIssued(stateDirectory(d.cfg.Gateway))
	if err != nil {
		d.log.Error("no issued token is accepted: "+err.Error(), "err", err)
		d.issuedErr = err
		return
	}
	d.issued = issued
}

// pruneIssued drops the issued tokens of clients the configuration no
// longer has; d.clientsMu is held.
func (d *daemon) pruneIssued(names []string) {
	if d.issued == nil {
		return
	}
	dropped, err := d.issued.Prune(names)
	if err != nil {
		d.log.Error("cannot drop the issued tokens of removed clients", "err", err)
	}
	for _, name := range dropped {
		d.log.Info(fmt.Sprintf("dropped the issued tokens of client %q, which the configuration no longer has", name), "client", name)
	}
}

// Listeners implements dbusapi.ClientsGateway.
func (g *dbusGateway) Listeners() []dbusapi.Listener {
	origin := "config"
	if g.d.lns.Activated {
		origin = "systemd"
	}
	var out []dbusapi.Listener
	for _, l := range g.d.lns.Listeners {
		a := l.Addr()
		out = append(out, dbusapi.Listener{Address: a.String(), Network: a.Network(), Origin: origin})
	}
	return out
}

// Clients implements dbusapi.ClientsGateway.
func (g *dbusGateway) Clients() []dbusapi.ClientStatus {
	set := g.d.clients.Load()
	sessions := g.d.gw.SessionsByClient()
	var out []dbusapi.ClientStatus
	if !set.Required() {
		anon := set.Client(config.AnonymousClient)
		out = append(out, dbusapi.ClientStatus{
			Name:              anon.Name,
			Identity:          `every caller (auth = "none")`,
			Policy:            "everything",
			NSessions:         uint32(sessions[anon.Name]),
			LastSeenTimestamp: micros(anon.LastSeen()),
		})
	}
	for _, c := range set.Clients() {
		st := dbusapi.ClientStatus{
			Name:              c.Name,
			Identity:          access.IdentitySummary(c.Config(), c.IssuedTokens()),
			Policy:            access.PolicySummary(c.Config()),
			NSessions:         uint32(sessions[c.Name]),
			LastSeenTimestamp: micros(c.LastSeen()),
		}
		for _, t := range set.Issued().Tokens(c.Name) {
			st.Tokens = append(st.Tokens, t.ID)
		}
		out = append(out, st)
	}
	return out
}

// NumClients implements dbusapi.ClientsGateway.
func (g *dbusGateway) NumClients() int { return len(g.d.gw.SessionsByClient()) }

// CreateToken implements dbusapi.ClientsGateway.
func (g *dbusGateway) CreateToken(_ context.Context, name string) (string, string, error) {
	d := g.d
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	set := d.clients.Load()
	if !set.Required() {
		return "", "", errors.New(`this gateway lets every caller in (auth = "none"): a token would change nothing`)
	}
	if set.Client(name) == nil {
		return "", "", fmt.Errorf("%w %q: a token is issued for a [clients.%s] table of the configuration, which says what it may use", dbusapi.ErrNoSuchClient, name, name)
	}
	if d.issued == nil {
		return "", "", fmt.Errorf("the issued tokens cannot be kept: %v", d.issuedErr)
	}
	token, t, err := d.issued.Create(name, time.Now())
	if err != nil {
		return "", "", err
	}
	set.RefreshIssued(name)
	d.log.Info(fmt.Sprintf("issued a token for client %q (id %s)", name, t.ID), "client", name, "token_id", t.ID)
	return token, t.ID, nil
}

// RevokeToken implements dbusapi.ClientsGateway.
func (g *dbusGateway) RevokeToken(_ context.Context, name, id string) error {
	d := g.d
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	set := d.clients.Load()
	c := set.Client(name)
	if c == nil || c.Config() == nil {
		return fmt.Errorf("%w %q", dbusapi.ErrNoSuchClient, name)
	}
	if d.issued == nil {
		return fmt.Errorf("the issued tokens cannot be read: %v", d.issuedErr)
	}
	ok, err := d.issued.Revoke(name, id)
	if err != nil {
		return err
	}
	if !ok {
		if cc := c.Config(); id != "" && strings.HasPrefix(cc.TokenSHA256, id) {
			return fmt.Errorf("%w: client %q's token is its token_sha256 in %s:%d, which only the configuration can revoke: remove it there (`mcpgatectl token revoke %s` for one it made) and reload",
				dbusapi.ErrNoSuchToken, name, cc.File, cc.Line, name)
		}
		return fmt.Errorf("%w: no token of id %q was issued for client %q", dbusapi.ErrNoSuchToken, id, name)
	}
	set.RefreshIssued(name)
	d.log.Info(fmt.Sprintf("revoked the issued token %s of client %q", id, name), "client", name, "token_id", id)
	return nil
}
