package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/unixuser"
)

// Client is an identity the gateway recognises, with what it may do.
type Client struct {
	Name        string
	Policy      *Policy
	MaxSessions int     // 0: no limit of its own
	Limit       *Bucket // requests per interval; nil: unlimited

	hash          []byte          // SHA-256 of its bearer token; nil without one
	tokenIdentity string          // the Identity of its configured token
	uids          map[uint32]bool // peers recognised by uid
	gids          map[uint32]bool // peers recognised by group
	byPeer        bool
	cfg           *config.Client // what it was made from; nil for Anonymous

	// issued are the tokens issued for it at run time (see Issued);
	// replaced whole when one is created or revoked.
	issued atomic.Pointer[[]issuedHash]
	// lastSeen is when a request of this client was last let in, in
	// seconds since the epoch; 0 before the first.
	lastSeen atomic.Int64
}

// Config returns the [clients.NAME] table the client was made from, or
// nil for Anonymous. It must not be changed.
func (c *Client) Config() *config.Client { return c.cfg }

// IssuedTokens returns how many tokens issued at run time it has.
func (c *Client) IssuedTokens() int {
	if issued := c.issued.Load(); issued != nil {
		return len(*issued)
	}
	return 0
}

// LastSeen returns when a request of the client was last let in, to the
// second, or the zero time.
func (c *Client) LastSeen() time.Time {
	if s := c.lastSeen.Load(); s > 0 {
		return time.Unix(s, 0)
	}
	return time.Time{}
}

// seen records a request let in now. It writes only when the second
// changed, so that the requests of a busy client do not all write one
// cache line.
func (c *Client) seen(now time.Time) {
	if s := now.Unix(); c.lastSeen.Load() != s {
		c.lastSeen.Store(s)
	}
}

// issuedHash is a token issued at run time, as a client matches it.
type issuedHash struct {
	sum      []byte // its SHA-256
	identity string // its Identity
}

// Caller is who sent a request: the client it acts as, and the identity
// that authenticated as that client. Several identities may be one client
// (OAuth users mapped to it by their groups, several tokens of it); a
// session and a stateless call's continuation belong to the identity.
type Caller struct {
	Client *Client
	// Identity names who authenticated, never with a secret:
	// "token:ID" for a bearer token (ID is the first 12 hex digits of its
	// SHA-256, as `mcpgatectl token list` shows it), "oauth:ISSUER:sub:SUB"
	// for an OAuth access token (the issuer's name and the token's sub;
	// see Grant.Identity),
	// "uid:UID" for a unix socket peer, "" for every caller when auth is
	// "none".
	Identity string
	// Subject is the client_claim of the caller's OAuth access token, ""
	// for a caller without one; Issuer the issuer URL of that token.
	Subject, Issuer string
	// AccessToken is the OAuth access token the resource server accepted
	// from the caller, for a backend that exchanges it (see
	// UpstreamCaller); zero for a caller without one.
	AccessToken AccessToken
}

// TokenIdentity is the Identity of the bearer token whose SHA-256 is sum.
func TokenIdentity(sum []byte) string { return "token:" + hex.EncodeToString(sum[:6]) }

// Anonymous is the client of every caller when auth is "none".
func Anonymous() *Client {
	return &Client{Name: config.AnonymousClient, Policy: AllowAll()}
}

// Set is the configured clients, as one reload built them. It is
// immutable.
type Set struct {
	required bool
	clients  []*Client // sorted by name
	anon     *Client

	issued *Issued // tokens issued at run time; nil: none

	oauth        *OAuth        // nil: OAuth off; see oauthidentify.go
	oauthClients []oauthClient // the clients tokens can name, by name
}

// Options tune NewSet.
type Options struct {
	// CredentialsDirectory is where token_credential files are read:
	// $CREDENTIALS_DIRECTORY, or [gateway] credentials_directory.
	CredentialsDirectory string
	// Previous, if set, is the set this one replaces: a client whose
	// rate_limit did not change keeps its bucket, so a reload is no way
	// around the limit. Every client keeps when it was last seen.
	Previous *Set
	// Issued, if set, holds tokens issued at run time for the clients.
	Issued *Issued
	// Resources is the OAuth resource of each listener, by its address
	// (ListenerResources); unused when OAuth is off.
	Resources map[string]string
}

// NewSet builds the clients of cfg. Problems that leave a client without
// an identity (a credential that cannot be read, an unknown user) are
// returned as warnings: the client then matches nobody, which is safe.
func NewSet(cfg *config.Config, opts Options) (*Set, []string) {
	s := &Set{required: cfg.Gateway.Auth != "none", anon: Anonymous(), issued: opts.Issued}
	if prev := opts.Previous; prev != nil && prev.anon != nil {
		s.anon.lastSeen.Store(prev.anon.lastSeen.Load())
	}
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Clients)) {
		c, w := newClient(cfg.Clients[name], opts)
		c.setIssued(opts.Issued.hashes(name))
		if old := opts.Previous.Client(name); old != nil {
			c.lastSeen.Store(old.lastSeen.Load())
		}
		s.clients = append(s.clients, c)
		warnings = append(warnings, w...)
	}
	warnings = append(warnings, s.initOAuth(cfg, opts)...)
	return s, warnings
}

// newClient builds one client, with warnings for the identities it lost.
func newClient(cc *config.Client, opts Options) (*Client, []string) {
	c := &Client{
		Name:        cc.Name,
		Policy:      NewPolicy(cc.Tools, cc.Resources, cc.Prompts),
		MaxSessions: cc.MaxSessions,
		cfg:         cc,
		uids:        map[uint32]bool{},
		gids:        map[uint32]bool{},
	}
	if cc.RateLimit.Burst > 0 {
		c.Limit = NewBucket(cc.RateLimit.Burst, cc.RateLimit.Interval)
		if old := opts.Previous.Client(cc.Name); old != nil && old.Limit != nil && old.Limit.String() == c.Limit.String() {
			c.Limit = old.Limit
		}
	}
	var warnings []string
	warn := func(format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf("%s:%d: client %q: ", cc.File, cc.Line, cc.Name)+fmt.Sprintf(format, args...))
	}
	switch {
	case cc.TokenSHA256 != "":
		c.hash, _ = hex.DecodeString(cc.TokenSHA256)
	case cc.TokenCredential != "":
		token, err := config.ReadCredential(opts.CredentialsDirectory, cc.TokenCredential)
		if err != nil {
			warn("no token: %v", err)
			break
		}
		sum := sha256.Sum256([]byte(token))
		c.hash = sum[:]
	}
	if c.hash != nil {
		c.tokenIdentity = TokenIdentity(c.hash)
	}
	for _, u := range cc.UnixUsers {
		uid, err := lookupID(u, func(n string) (string, error) {
			usr, err := user.Lookup(n)
			if err != nil {
				return "", err
			}
			return usr.Uid, nil
		})
		if err != nil {
			warn("unix_users: %v", err)
			continue
		}
		c.uids[uid] = true
	}
	for _, g := range cc.UnixGroups {
		gid, err := lookupID(g, func(n string) (string, error) {
			grp, err := user.LookupGroup(n)
			if err != nil {
				return "", err
			}
			return grp.Gid, nil
		})
		if err != nil {
			warn("unix_groups: %v", err)
			continue
		}
		c.gids[gid] = true
	}
	c.byPeer = len(c.uids) > 0 || len(c.gids) > 0
	return c, warnings
}

// lookupID resolves a user or group given by number or name.
func lookupID(s string, byName func(string) (string, error)) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	id, err := byName(s)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(id, 10, 32)
	return uint32(n), err
}

func (c *Client) setIssued(hashes [][]byte) {
	issued := make([]issuedHash, len(hashes))
	for i, h := range hashes {
		issued[i] = issuedHash{sum: h, identity: TokenIdentity(h)}
	}
	c.issued.Store(&issued)
}

// RefreshIssued makes the named client's issued tokens those its store
// holds now: call it after the store's Create or Revoke. A token revoked
// is refused from the next request on.
func (s *Set) RefreshIssued(name string) {
	if c := s.Client(name); c != nil && c != s.anon {
		c.setIssued(s.issued.hashes(name))
	}
}

// Issued returns the store of issued tokens, or nil.
func (s *Set) Issued() *Issued {
	if s == nil {
		return nil
	}
	return s.issued
}

// Clients returns the configured clients, sorted by name.
func (s *Set) Clients() []*Client {
	if s == nil {
		return nil
	}
	return slices.Clone(s.clients)
}

// Required reports whether callers must identify themselves.
func (s *Set) Required() bool { return s.required }

// Names returns the configured client names, sorted.
func (s *Set) Names() []string {
	names := make([]string, len(s.clients))
	for i, c := range s.clients {
		names[i] = c.Name
	}
	return names
}

// Client returns the named client, or nil (also for a nil Set).
func (s *Set) Client(name string) *Client {
	if s == nil {
		return nil
	}
	if name == config.AnonymousClient && !s.required {
		return s.anon
	}
	for _, c := range s.clients {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Refusal says why a caller was not let in.
type Refusal struct {
	Status int    // http.StatusUnauthorized, http.StatusForbidden or http.StatusBadRequest
	Reason string // for the journal: which rule refused
	Advice string // for the caller: what to do
	// Challenge is the WWW-Authenticate value when OAuth is on (RFC 6750,
	// RFC 9728); "" otherwise.
	Challenge string
}

// Error returns the reason, so that a Refusal can travel as an error.
func (r *Refusal) Error() string { return r.Reason }

// Identify returns who a request comes from: the holder of the bearer
// token it presents, else the client its peer credentials match.
func (s *Set) Identify(r *http.Request, peer Peer) (Caller, *Refusal) {
	c, refusal := s.identify(r, peer)
	if c.Client != nil {
		c.Client.seen(time.Now())
	}
	return c, refusal
}

func (s *Set) identify(r *http.Request, peer Peer) (Caller, *Refusal) {
	if !s.required {
		return Caller{Client: s.anon}, nil
	}
	// A token in a URL ends up in logs and Referer headers (RFC 6750
	// section 5.3); the MCP authorization specification forbids it.
	if q := r.URL.RawQuery; q != "" && (r.URL.Query().Has("access_token") || r.URL.Query().Has("token")) {
		return Caller{}, s.badRequest(r, peer, "a token in the query string", "send the token in the Authorization header, never in the URL")
	}
	if len(r.Header.Values("Authorization")) > 1 {
		return Caller{}, s.badRequest(r, peer, "more than one Authorization header", "send one Authorization: Bearer TOKEN header")
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			if s.oauth != nil {
				ref := s.missingToken(r, peer)
				ref.Reason = "the Authorization header is not a bearer token"
				return Caller{}, ref
			}
			return Caller{}, &Refusal{Status: http.StatusUnauthorized, Reason: "the Authorization header is not a bearer token",
				Advice: "send Authorization: Bearer TOKEN with a token from `mcpgatectl token create`"}
		}
		token = strings.TrimSpace(token)
		sum := sha256.Sum256([]byte(token)) // once: static tokens and OAuth's cache both key by it
		if c := s.byHash(sum); c.Client != nil {
			return c, nil
		}
		if s.oauth != nil {
			return s.byOAuth(r, peer, token, sum)
		}
		return Caller{}, &Refusal{Status: http.StatusUnauthorized, Reason: "wrong bearer token: it matches no client",
			Advice: "the token is not known to this gateway (revoked, or never created); create one with `mcpgatectl token create NAME`"}
	}
	if peer.Cred != nil {
		if c := s.byPeer(peer.Cred.Uid, peer.Cred.Gid, peer.Groups); c != nil {
			return Caller{Client: c, Identity: peer.callerIdentity()}, nil
		}
		name := strconv.Itoa(int(peer.Cred.Uid))
		if u, err := user.LookupId(name); err == nil {
			name = u.Username + " (" + name + ")"
		}
		return Caller{}, &Refusal{Status: http.StatusForbidden, Reason: "uid " + name + " matches no client's unix_users or unix_groups",
			Advice: "user " + name + " may not use this gateway; an administrator can add it to unix_users or unix_groups of a [clients.NAME] table, or give it a token"}
	}
	if s.oauth != nil {
		return Caller{}, s.missingToken(r, peer)
	}
	return Caller{}, &Refusal{Status: http.StatusUnauthorized, Reason: "no bearer token", Advice: "this listener needs Authorization: Bearer TOKEN; `mcpgatectl token create NAME` makes one (or connect over the unix socket as a user a client lists)"}
}

// byHash finds the client whose token hashes to sum, the SHA-256 of the
// presented one. Every client is compared, in constant time, so timing
// tells nothing.
func (s *Set) byHash(sum [32]byte) Caller {
	var found Caller
	for _, c := range s.clients {
		if c.hash != nil && subtle.ConstantTimeCompare(c.hash, sum[:]) == 1 && found.Client == nil {
			found = Caller{Client: c, Identity: c.tokenIdentity}
		}
		if issued := c.issued.Load(); issued != nil {
			for _, h := range *issued {
				if subtle.ConstantTimeCompare(h.sum, sum[:]) == 1 && found.Client == nil {
					found = Caller{Client: c, Identity: h.identity}
				}
			}
		}
	}
	return found
}

// byPeer finds the first client, by name, listing the uid or one of the
// peer's groups.
func (s *Set) byPeer(uid, gid uint32, groups []uint32) *Client {
	for _, c := range s.clients {
		if !c.byPeer {
			continue
		}
		if c.uids[uid] || c.gids[gid] {
			return c
		}
		for _, g := range groups {
			if c.gids[g] {
				return c
			}
		}
	}
	return nil
}

// peerGroups returns the supplementary groups of the peer process, from
// /proc while it runs, else those of its user in the group database.
func peerGroups(uid uint32, pid int32) []uint32 {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				// A pid reused by another user's process is not the peer.
				if f := strings.Fields(rest); len(f) == 0 || f[0] != strconv.Itoa(int(uid)) {
					break
				}
			}
			if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
				var out []uint32
				for f := range strings.FieldsSeq(rest) {
					if n, err := strconv.ParseUint(f, 10, 32); err == nil {
						out = append(out, uint32(n))
					}
				}
				return out
			}
		}
	}
	return unixuser.Groups(uid)
}
