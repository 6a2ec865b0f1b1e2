package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
)

// MetadataPath is where RFC 9728 puts a protected resource's metadata; the
// resource's own path follows it.
const MetadataPath = "/.well-known/oauth-protected-resource"

// oauthClient is a client tokens can name, as the set matches it.
type oauthClient struct {
	c        *Client
	issuer   string
	subjects []string
	groups   []string
	scopes   []string
}

// initOAuth sets up the resource server of cfg: the one of prev if its
// configuration did not change (its keys and validated tokens stay), else
// a new one.
func (s *Set) initOAuth(cfg *config.Config, opts Options) []string {
	var warnings []string
	prev := opts.Previous
	switch {
	case !cfg.OAuth.Enabled():
	case prev != nil && prev.oauth != nil && prev.oauth.cfg.Equal(&cfg.OAuth) && prev.oauth.endpoint == cfg.Gateway.Endpoint &&
		maps.Equal(prev.oauth.resources, opts.Resources) && prev.oauth.sameSecrets(opts.CredentialsDirectory):
		s.oauth = prev.oauth
	default:
		o, err := NewOAuth(cfg, opts.Resources, opts.CredentialsDirectory)
		if err != nil {
			warnings = append(warnings, err.Error())
		}
		s.oauth = o
	}
	for _, c := range s.clients {
		cc := cfg.Clients[c.Name]
		if cc == nil || !cc.OAuthIdentified() || s.oauth == nil {
			continue
		}
		s.oauthClients = append(s.oauthClients, oauthClient{c: c, issuer: cc.OAuthIssuer,
			subjects: cc.OAuthSubjects, groups: cc.OAuthGroups, scopes: cc.OAuthScopes})
	}
	return warnings
}

// OAuth returns the resource server, or nil when OAuth is off.
func (s *Set) OAuth() *OAuth {
	if s == nil {
		return nil
	}
	return s.oauth
}

// byOAuth identifies the holder of an OAuth access token.
func (s *Set) byOAuth(r *http.Request, peer Peer, token string, sum [32]byte) (Caller, *Refusal) {
	o := s.oauth
	resource := o.Resource(peer)
	if resource == "" {
		return Caller{}, noResource(peer)
	}
	g, err := o.validateHashed(r.Context(), token, sum, resource)
	if err != nil {
		var te *TokenError
		if !errors.As(err, &te) {
			te = &TokenError{err.Error()}
		}
		return Caller{}, &Refusal{Status: http.StatusUnauthorized, Reason: "invalid access token: " + te.Reason,
			Advice:    "get a new token for resource " + resource + " from an authorization server listed at " + MetadataURL(resource),
			Challenge: o.challenge(resource, "invalid_token", te.Reason, nil)}
	}
	oc, lacking := s.matchGrant(g)
	if oc == nil && lacking != nil {
		oc = lacking // to say which scopes it lacks
	}
	if oc == nil {
		return Caller{}, &Refusal{Status: http.StatusForbidden,
			Reason: fmt.Sprintf("the access token of issuer %q is valid, but its %s %s matches no client's oauth_subjects or oauth_groups",
				g.Issuer, o.cfg.Issuers[g.Issuer].ClientClaim, quoteShort(g.Subject)),
			Advice: "this identity may not use this gateway; an administrator can add it to oauth_subjects or oauth_groups of a [clients.NAME] table"}
	}
	want := append(slices.Clone(o.cfg.ScopesRequired), oc.scopes...)
	if missing := g.missingScopes(want); len(missing) > 0 {
		return Caller{}, &Refusal{Status: http.StatusForbidden,
			Reason:    fmt.Sprintf("client %q: the access token lacks scope %s", oc.c.Name, strings.Join(missing, " ")),
			Advice:    "ask the authorization server for a token with scope \"" + strings.Join(want, " ") + "\"",
			Challenge: o.challenge(resource, "insufficient_scope", "the token lacks scope "+strings.Join(missing, " "), want)}
	}
	return Caller{Client: oc.c, Identity: g.Identity, Subject: g.Subject, Issuer: o.cfg.Issuers[g.Issuer].Issuer, AccessToken: NewAccessToken(token)}, nil
}

// matchGrant returns the client the grant is: of the clients whose
// oauth_subjects or oauth_groups name it, the one with the most
// oauth_scopes the token carries all of, the first by name among equals,
// so that clients of one identity with more scopes can be given more
// tools. If the grant names clients but carries the scopes of none, it
// returns nil and the first of them.
func (s *Set) matchGrant(g *Grant) (best, lacking *oauthClient) {
	for i := range s.oauthClients {
		oc := &s.oauthClients[i]
		if oc.issuer != g.Issuer {
			continue
		}
		named := (g.Subject != "" && slices.Contains(oc.subjects, g.Subject)) ||
			slices.ContainsFunc(g.Groups, func(grp string) bool { return slices.Contains(oc.groups, grp) })
		switch {
		case !named:
		case len(g.missingScopes(oc.scopes)) > 0:
			if lacking == nil {
				lacking = oc
			}
		case best == nil || len(oc.scopes) > len(best.scopes):
			best = oc
		}
	}
	return best, lacking
}

// missingToken is the refusal of a request without a token when OAuth is
// on: the 401 that starts a client's authorization.
func (s *Set) missingToken(r *http.Request, peer Peer) *Refusal {
	resource := s.oauth.Resource(peer)
	if resource == "" {
		return noResource(peer)
	}
	return &Refusal{Status: http.StatusUnauthorized, Reason: "no bearer token",
		Advice:    "this listener needs Authorization: Bearer TOKEN, an access token for resource " + resource + " from an authorization server listed at " + MetadataURL(resource),
		Challenge: s.oauth.challenge(resource, "", "", s.oauth.cfg.ScopesRequired)}
}

// noResource is the refusal of a token on a listener the gateway knows
// no resource of, which the daemon's start-up check rules out.
func noResource(peer Peer) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Reason: "no OAuth resource is known for listener " + peer.Local,
		Advice: "an administrator can set resource in the [oauth] section"}
}

// badRequest is the refusal of a request that carries a token wrongly.
func (s *Set) badRequest(r *http.Request, peer Peer, reason, advice string) *Refusal {
	ref := &Refusal{Status: http.StatusBadRequest, Reason: reason, Advice: advice}
	if s.oauth != nil {
		if resource := s.oauth.Resource(peer); resource != "" {
			ref.Challenge = s.oauth.challenge(resource, "invalid_request", reason, nil)
		}
	}
	return ref
}

// challenge returns a WWW-Authenticate value (RFC 6750 section 3, RFC 9728
// section 5.1).
func (o *OAuth) challenge(resource, code, description string, scopes []string) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="`)
	b.WriteString(MetadataURL(resource))
	b.WriteByte('"')
	if len(scopes) > 0 {
		b.WriteString(`, scope="` + strings.Join(scopes, " ") + `"`)
	}
	if code != "" {
		b.WriteString(`, error="` + code + `"`)
	}
	if description != "" {
		b.WriteString(`, error_description="` + headerSafe(description) + `"`)
	}
	return b.String()
}

// headerSafe keeps the characters RFC 6750 allows in error_description
// (printable ASCII but '"' and '\'), and replaces the others.
func headerSafe(s string) string {
	const max = 200
	b := []byte(s)
	if len(b) > max {
		b = b[:max]
	}
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b[i] = '\''
		}
	}
	return string(b)
}

// MetadataURL returns where the RFC 9728 metadata of resource is.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return MetadataPath
	}
	u.Path = MetadataPath + strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String()
}

// Resource returns the canonical URI of the MCP endpoint on the listener
// peer came to: the configured resource, else the one derived from that
// listener when the gateway started (ListenerResources); "" for a
// listener it does not know. Nothing of the request counts: a client
// does not choose the audience its token is checked against.
func (o *OAuth) Resource(peer Peer) string {
	if o.cfg.Resource != "" {
		return o.cfg.Resource
	}
	return o.resources[peer.Local]
}

// Metadata returns the RFC 9728 metadata document of resource.
func (o *OAuth) Metadata(resource string) []byte {
	md := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ResourceName           string   `json:"resource_name"`
	}{resource, o.Issuers(), o.cfg.ScopesSupported, []string{"header"}, "mcpgate"}
	b, _ := json.Marshal(md)
	return b
}

// MetadataPaths returns the paths the metadata is served at: the bare
// well-known path and the one with the resource's path.
func (o *OAuth) MetadataPaths() []string {
	paths := []string{MetadataPath, MetadataPath + o.endpoint}
	if o.cfg.Resource != "" {
		if u, err := url.Parse(MetadataURL(o.cfg.Resource)); err == nil && !slices.Contains(paths, u.Path) {
			paths = append(paths, u.Path)
		}
	}
	return paths
}
