package dbusapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/godbus/dbus/v5"
)

// TokensAction is the polkit action that allows creating and revoking
// clients' bearer tokens: handing out a way in is a different trust than
// restarting a server.
const TokensAction = "org.mcpgate.Gateway1.tokens"

// Errors of the token methods.
const (
	ErrorNoSuchClient = "org.mcpgate.Gateway1.Error.NoSuchClient"
	ErrorNoSuchToken  = "org.mcpgate.Gateway1.Error.NoSuchToken"
)

var (
	// ErrNoSuchClient is returned, possibly wrapped, for a client name
	// that is not configured.
	ErrNoSuchClient = errors.New("no such client")
	// ErrNoSuchToken is returned, possibly wrapped, for a token id that
	// the gateway did not issue for that client.
	ErrNoSuchToken = errors.New("no such token")
)

// DefaultSessionSignalInterval is how often, at most, PropertiesChanged
// announces NSessions and NClients: a busy gateway opens and closes
// sessions far faster than anyone watches them.
const DefaultSessionSignalInterval = time.Second

// Listener is one element of the Manager property Listeners, a(sss): a
// socket the gateway serves MCP on.
type Listener struct {
	Address string `json:"address"` // "127.0.0.1:7431", "/run/mcpgate/mcpgate.sock"
	Network string `json:"network"` // "tcp" or "unix"
	Origin  string `json:"origin"`  // "systemd" (socket activation) or "config" (listen)
}

// ClientStatus is one element of ListClients' a(sssutas): a configured
// client, without any secret.
type ClientStatus struct {
	Name     string `json:"name"`
	Identity string `json:"identity"` // how it is recognised, e.g. "token sha256:9f86d081884c…; unix users alice"
	Policy   string `json:"policy"`   // what it may use, e.g. "tools github__*"
	// NSessions is the number of its open sessions.
	NSessions uint32 `json:"sessions"`
	// LastSeenTimestamp is when a request of it was last let in, in
	// microseconds since the epoch (to the second); 0 since the start.
	LastSeenTimestamp uint64 `json:"last_seen_timestamp"`
	// Tokens are the ids of the tokens issued for it with CreateToken.
	Tokens []string `json:"tokens"`
}

// ClientsGateway is a Gateway that shows its listeners and clients and
// issues tokens. The client methods fail, and Listeners and NClients are
// empty, on a Gateway that does not implement it.
type ClientsGateway interface {
	// Listeners returns the sockets the gateway serves MCP on.
	Listeners() []Listener
	// Clients returns the configured clients, sorted by name.
	Clients() []ClientStatus
	// NumClients returns the number of clients with an open session.
	NumClients() int
	// CreateToken issues a bearer token for the named client and returns
	// it with its id. The token is valid at once and outlasts reloads and
	// restarts until revoked; it is kept nowhere but as a hash.
	CreateToken(ctx context.Context, client string) (token, id string, err error)
	// RevokeToken revokes the token of the named client with the id
	// CreateToken returned: it is refused from the next request on.
	RevokeToken(ctx context.Context, client, id string) error
}

func (s *Server) clientsGateway() (ClientsGateway, *dbus.Error) {
	cg, ok := s.gw.(ClientsGateway)
	if !ok {
		return nil, dbusError(errors.New("this gateway issues no tokens over D-Bus"))
	}
	return cg, nil
}

// clientRow is one element of ListClients' a(sssutas).
type clientRow struct {
	Name, Identity, Policy string
	NSessions              uint32
	LastSeenTimestamp      uint64
	Tokens                 []string
}

// ListClients returns every configured client: its name, how it is
// recognised, what it may use, its open sessions, when it was last seen
// and the ids of the tokens issued for it. Reading is open, as the
// configuration's files are.
func (m managerObject) ListClients() ([]clientRow, *dbus.Error) {
	rows := []clientRow{}
	cg, ok := m.s.gw.(ClientsGateway)
	if !ok {
		return rows, nil
	}
	for _, c := range cg.Clients() {
		rows = append(rows, clientRow{c.Name, c.Identity, c.Policy, c.NSessions, c.LastSeenTimestamp, nonNil(c.Tokens)})
	}
	return rows, nil
}

// CreateToken issues a bearer token for a configured client and returns
// it, to the caller alone, with its id.
func (m managerObject) CreateToken(msg dbus.Message, client string) (string, string, *dbus.Error) {
	if err := m.s.authorizeAction(msg, TokensAction); err != nil {
		return "", "", err
	}
	cg, derr := m.s.clientsGateway()
	if derr != nil {
		return "", "", derr
	}
	token, id, err := cg.CreateToken(m.s.ctx, client)
	if err != nil {
		return "", "", dbusError(err)
	}
	m.s.Changed()
	return token, id, nil
}

// RevokeToken revokes a token CreateToken issued.
func (m managerObject) RevokeToken(msg dbus.Message, client, id string) *dbus.Error {
	if err := m.s.authorizeAction(msg, TokensAction); err != nil {
		return err
	}
	cg, derr := m.s.clientsGateway()
	if derr != nil {
		return derr
	}
	if err := cg.RevokeToken(m.s.ctx, client, id); err != nil {
		return dbusError(err)
	}
	m.s.Changed()
	return nil
}

// listeners returns the Listeners property's value.
func (s *Server) listeners() []Listener {
	if cg, ok := s.gw.(ClientsGateway); ok {
		return nonNil(cg.Listeners())
	}
	return []Listener{}
}

// numClients counts the clients with an open session.
func (s *Server) numClients() uint32 {
	cg, ok := s.gw.(ClientsGateway)
	if !ok {
		return 0
	}
	return uint32(cg.NumClients())
}

// ListClients returns the gateway's clients.
func (c *Client) ListClients(ctx context.Context) ([]ClientStatus, error) {
	var rows []clientRow
	if err := c.call(ctx, ManagerPath, ManagerInterface+".ListClients", 0, nil, &rows); err != nil {
		return nil, err
	}
	out := make([]ClientStatus, len(rows))
	for i, r := range rows {
		out[i] = ClientStatus{r.Name, r.Identity, r.Policy, r.NSessions, r.LastSeenTimestamp, r.Tokens}
	}
	return out, nil
}

// CreateToken asks the gateway to issue a token for client; it returns
// the token and its id.
func (c *Client) CreateToken(ctx context.Context, client string) (token, id string, err error) {
	var flags dbus.Flags
	if c.Interactive {
		flags = dbus.FlagAllowInteractiveAuthorization
	}
	err = c.call(ctx, ManagerPath, ManagerInterface+".CreateToken", flags, []any{client}, &token, &id)
	return token, id, err
}

// RevokeToken asks the gateway to revoke a token it issued.
func (c *Client) RevokeToken(ctx context.Context, client, id string) error {
	var flags dbus.Flags
	if c.Interactive {
		flags = dbus.FlagAllowInteractiveAuthorization
	}
	return c.call(ctx, ManagerPath, ManagerInterface+".RevokeToken", flags, []any{client, id})
}

// Listeners returns the gateway's Listeners property.
func (c *Client) Listeners(ctx context.Context) ([]Listener, error) {
	var v dbus.Variant
	if err := c.call(ctx, ManagerPath, propertiesInterface+".Get", 0, []any{ManagerInterface, "Listeners"}, &v); err != nil {
		return nil, err
	}
	var out []Listener
	if err := v.Store(&out); err != nil {
		return nil, fmt.Errorf("property Listeners: %w", err)
	}
	return out, nil
}
