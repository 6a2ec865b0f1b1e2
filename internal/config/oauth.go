package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// OAuth holds the [oauth] table: mcpgate as an OAuth 2.1 resource server
// (RFC 9728, RFC 8707) that accepts access tokens from trusted issuers.
// With no issuer configured OAuth is off.
type OAuth struct {
	File string // where [oauth] was defined
	Line int
	// Resource is the canonical URI of the MCP endpoint that tokens must
	// name as audience; "" derives it from each listener at start (see
	// access.ListenerResources), never from a request.
	Resource        string
	ScopesSupported []string      // published in the resource metadata
	ScopesRequired  []string      // every token needs these; named in WWW-Authenticate
	Leeway          time.Duration // clock skew allowed on exp, nbf and iat; default 30s
	// JWKSRefreshInterval is the least time between two fetches of an
	// issuer's keys caused by unknown key ids; default 1m.
	JWKSRefreshInterval time.Duration
	JWKSMaxAge          time.Duration      // keys older than this are fetched again; default 1h
	TokenCacheSize      int                // validated tokens remembered; default 10000
	HTTPTimeout         time.Duration      // for discovery, JWKS and introspection; default 10s
	Issuers             map[string]*Issuer // by name
}

// Issuer holds one [oauth.issuers.NAME] table: an authorization server
// whose tokens the gateway accepts.
type Issuer struct {
	Name string
	File string
	Line int
	// Issuer is the exact "iss" of its tokens and the base of its metadata
	// (RFC 8414 or OpenID Connect discovery).
	Issuer                 string
	JWKSURI                string   // "" discovers it from the issuer's metadata
	IntrospectionEndpoint  string   // set: tokens are checked by RFC 7662 introspection, not as JWTs
	ClientID               string   // the gateway's client id at the introspection endpoint
	ClientSecretCredential string   // credential holding its secret
	Algorithms             []string // JWS algorithms accepted; default RS256, ES256, EdDSA
	Audiences              []string // accepted "aud" values; default the resource
	ClientClaim            string   // claim naming the caller for oauth_subjects; default "sub"
	GroupsClaim            string   // claim listing its groups for oauth_groups; default "groups"
}

// OAuthIdentity holds the keys of a [clients.NAME] table that recognise
// the client in an OAuth access token.
type OAuthIdentity struct {
	OAuthIssuer   string   // name of the [oauth.issuers.NAME]; default the only one
	OAuthSubjects []string // values of the issuer's client_claim
	OAuthGroups   []string // values of the issuer's groups_claim
	OAuthScopes   []string // scopes the token must carry to act as this client
}

// Enabled reports whether the gateway accepts OAuth access tokens.
func (o *OAuth) Enabled() bool { return len(o.Issuers) > 0 }

// Equal reports whether o and p configure the same resource server,
// ignoring File and Line.
func (o *OAuth) Equal(p *OAuth) bool {
	if o.Resource != p.Resource || !slices.Equal(o.ScopesSupported, p.ScopesSupported) ||
		!slices.Equal(o.ScopesRequired, p.ScopesRequired) ||
		o.Leeway != p.Leeway || o.JWKSRefreshInterval != p.JWKSRefreshInterval || o.JWKSMaxAge != p.JWKSMaxAge ||
		o.TokenCacheSize != p.TokenCacheSize || o.HTTPTimeout != p.HTTPTimeout || len(o.Issuers) != len(p.Issuers) {
		return false
	}
	for name, i := range o.Issuers {
		j := p.Issuers[name]
		if j == nil || i.Issuer != j.Issuer || i.JWKSURI != j.JWKSURI || i.IntrospectionEndpoint != j.IntrospectionEndpoint ||
			i.ClientID != j.ClientID || i.ClientSecretCredential != j.ClientSecretCredential ||
			!slices.Equal(i.Algorithms, j.Algorithms) || !slices.Equal(i.Audiences, j.Audiences) ||
			i.ClientClaim != j.ClientClaim || i.GroupsClaim != j.GroupsClaim {
			return false
		}
	}
	return true
}

// oauthIdentityEqual reports whether two clients are recognised alike in
// tokens.
func (a *OAuthIdentity) oauthIdentityEqual(b *OAuthIdentity) bool {
	return a.OAuthIssuer == b.OAuthIssuer && slices.Equal(a.OAuthSubjects, b.OAuthSubjects) &&
		slices.Equal(a.OAuthGroups, b.OAuthGroups) && slices.Equal(a.OAuthScopes, b.OAuthScopes)
}

// DefaultAlgorithms are the JWS algorithms accepted when an issuer names
// none: asymmetric only, so that a public key can never verify a token.
func DefaultAlgorithms() []string { return []string{"RS256", "ES256", "EdDSA"} }

// acceptedAlgorithms are the JWS algorithms an issuer may list.
var acceptedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

func defaultOAuth() OAuth {
	return OAuth{
		Leeway:              30 * time.Second,
		JWKSRefreshInterval: time.Minute,
		JWKSMaxAge:          time.Hour,
		TokenCacheSize:      10000,
		HTTPTimeout:         10 * time.Second,
	}
}

func defaultIssuer(name string) *Issuer {
	return &Issuer{Name: name, Algorithms: DefaultAlgorithms(), ClientClaim: "sub", GroupsClaim: "groups"}
}

func oauthFields() []field[OAuth] {
	return []field[OAuth]{
		{"resource", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return d.str(at, v, &o.Resource, checkResource)
		}},
		{"scopes_supported", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return d.strList(at, v, &o.ScopesSupported, checkScope)
		}},
		{"scopes_required", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return d.strList(at, v, &o.ScopesRequired, checkScope)
		}},
		{"leeway", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return d.duration(at, v, &o.Leeway)
		}},
		{"jwks_refresh_interval", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return d.duration(at, v, &o.JWKSRefreshInterval)
		}},
		{"jwks_max_age", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return d.duration(at, v, &o.JWKSMaxAge)
		}},
		{"token_cache_size", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return integer(d, at, v, &o.TokenCacheSize, 0, math.MaxInt32)
		}},
		{"http_timeout", func(d *decoder, at keyPath, v any, o *OAuth) bool {
			return d.duration(at, v, &o.HTTPTimeout)
		}},
	}
}

func issuerFields() []field[Issuer] {
	return []field[Issuer]{
		{"issuer", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.str(at, v, &i.Issuer, checkOAuthURL)
		}},
		{"jwks_uri", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.str(at, v, &i.JWKSURI, checkOAuthURL)
		}},
		{"introspection_endpoint", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.str(at, v, &i.IntrospectionEndpoint, checkOAuthURL)
		}},
		{"client_id", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.str(at, v, &i.ClientID, checkNotEmpty)
		}},
		{"client_secret_credential", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.str(at, v, &i.ClientSecretCredential, checkCredentialName)
		}},
		{"algorithms", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.strList(at, v, &i.Algorithms, checkAlgorithm)
		}},
		{"audiences", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.strList(at, v, &i.Audiences, checkNotEmpty)
		}},
		{"client_claim", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.str(at, v, &i.ClientClaim, checkNotEmpty)
		}},
		{"groups_claim", func(d *decoder, at keyPath, v any, i *Issuer) bool {
			return d.str(at, v, &i.GroupsClaim, checkNotEmpty)
		}},
	}
}

func oauthIdentityFields() []field[Client] {
	return []field[Client]{
		{"oauth_issuer", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.str(at, v, &c.OAuthIssuer, checkNotEmpty)
		}},
		{"oauth_subjects", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.OAuthSubjects, checkNotEmpty)
		}},
		{"oauth_groups", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.OAuthGroups, checkNotEmpty)
		}},
		{"oauth_scopes", func(d *decoder, at keyPath, v any, c *Client) bool {
			return d.strList(at, v, &c.OAuthScopes, checkScope)
		}},
	}
}

// oauth decodes the [oauth] table of one file into o. Keys set in later
// files override earlier ones; an issuer may be defined once.
func (d *decoder) oauth(at keyPath, v any, o *OAuth) {
	t, ok := d.table(at, v, "a table", "write an [oauth] header with its keys below it, and an [oauth.issuers.NAME] table per issuer")
	if !ok {
		return
	}
	if o.File == "" {
		o.File, o.Line = d.f.path, d.f.lookup(at).line
	}
	rest := maps.Clone(t)
	delete(rest, "issuers")
	if _, ok := rest["trusted_proxies"]; ok {
		// It let a proxy's X-Forwarded-Host choose the audience tokens
		// were checked against, which the client chose in turn.
		d.fail(at.child("trusted_proxies"), "trusted_proxies was removed: the resource is no longer taken from X-Forwarded-Host or any other header of a request; set resource to the URL clients use (such as \"https://mcp.example.com/mcp\") and remove trusted_proxies")
		delete(rest, "trusted_proxies")
	}
	decodeTable(d, at, rest, oauthFields(), o)
	iv, ok := t["issuers"]
	if !ok {
		return
	}
	iat := at.child("issuers")
	it, ok := d.table(iat, iv, "a table of issuers", "write an [oauth.issuers.NAME] header for each issuer")
	if !ok {
		return
	}
	if o.Issuers == nil {
		o.Issuers = map[string]*Issuer{}
	}
	for _, name := range slices.Sorted(maps.Keys(it)) {
		nat := iat.child(name)
		if prev, ok := o.Issuers[name]; ok {
			d.fail(nat, "issuer defined twice: first at %s:%d; keep one definition", prev.File, prev.Line)
			continue
		}
		if i := d.issuer(nat, it[name]); i != nil {
			o.Issuers[name] = i
		}
	}
}

// issuer decodes one [oauth.issuers.NAME] table and checks that its keys
// agree with each other.
func (d *decoder) issuer(at keyPath, v any) *Issuer {
	t, ok := d.table(at, v, "a table", "write an [oauth.issuers.NAME] header with the issuer's keys below it")
	if !ok {
		return nil
	}
	name := at[len(at)-1]
	i := defaultIssuer(name)
	i.File, i.Line = d.f.path, d.f.lookup(at).line
	if !clientName.MatchString(name) {
		d.fail(at, `invalid issuer name %q; use 1 to 64 letters, digits, "_" or "-"`, name)
	}
	refused := decodeTable(d, at, t, issuerFields(), i)
	has := func(k string) bool { _, ok := t[k]; return ok }
	switch {
	case !has("issuer") && !refused["issuer"]:
		d.fail(at, `the issuer has no issuer URL: set issuer = "https://auth.example.com", exactly as the "iss" of its tokens`)
	case has("jwks_uri") && has("introspection_endpoint"):
		d.fail(at.child("introspection_endpoint"), "set jwks_uri (tokens are JWTs checked with the issuer's keys) or introspection_endpoint (tokens are checked by asking the issuer), not both")
	case has("introspection_endpoint") && (!has("client_id") || !has("client_secret_credential")):
		d.fail(at.child("introspection_endpoint"), "introspection needs the gateway's own client_id and client_secret_credential at the issuer (RFC 7662 requires the caller to authenticate)")
	case !has("introspection_endpoint") && (has("client_id") || has("client_secret_credential")):
		k := "client_id"
		if !has(k) {
			k = "client_secret_credential"
		}
		d.fail(at.child(k), "%s is used only for introspection; set introspection_endpoint too, or remove it", k)
	case has("introspection_endpoint") && has("algorithms"):
		d.fail(at.child("algorithms"), "algorithms applies to JWTs; an issuer checked by introspection_endpoint has none: remove it")
	}
	return i
}

// checkOAuth checks what spans tables: auth, the issuers and the clients
// that name them.
func (l *loader) checkOAuth(cfg *Config) {
	o := &cfg.OAuth
	fail := func(file string, line int, key, format string, args ...any) {
		l.add(0, &Error{File: file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if o.File != "" && !o.Enabled() {
		fail(o.File, o.Line, "oauth", "[oauth] names no issuer, so no token could ever be accepted; add an [oauth.issuers.NAME] table with issuer = \"https://…\", or remove [oauth]")
		return
	}
	if o.Enabled() && cfg.Gateway.Auth == "none" {
		fail(o.File, o.Line, "oauth", `[oauth] has no effect with [gateway] auth = "none", where every caller is "anonymous"; set auth = "required"`)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clients)) {
		c := cfg.Clients[name]
		uses := len(c.OAuthSubjects) > 0 || len(c.OAuthGroups) > 0
		key := "clients." + name
		switch {
		case (uses || c.OAuthIssuer != "" || len(c.OAuthScopes) > 0) && !o.Enabled():
			fail(c.File, c.Line, key, "client %q is recognised by OAuth tokens, but no [oauth.issuers.NAME] is configured; add one, or remove the oauth_* keys", name)
		case !uses && (c.OAuthIssuer != "" || len(c.OAuthScopes) > 0):
			fail(c.File, c.Line, key, "client %q sets oauth_issuer or oauth_scopes but neither oauth_subjects nor oauth_groups, so no token is ever this client; add one of them", name)
		case c.OAuthIssuer != "" && o.Issuers[c.OAuthIssuer] == nil:
			fail(c.File, c.Line, key+".oauth_issuer", "no issuer %q; the issuers are %s", c.OAuthIssuer, strings.Join(slices.Sorted(maps.Keys(o.Issuers)), ", "))
		case uses && c.OAuthIssuer == "" && len(o.Issuers) > 1:
			fail(c.File, c.Line, key, "client %q: several issuers are configured; say whose tokens name it with oauth_issuer = \"NAME\"", name)
		case uses && c.OAuthIssuer == "":
			for n := range o.Issuers {
				c.OAuthIssuer = n
			}
		}
	}
}

// OAuthIdentified reports whether tokens can name c.
func (c *Client) OAuthIdentified() bool { return len(c.OAuthSubjects) > 0 || len(c.OAuthGroups) > 0 }

func checkResource(s string) string {
	if msg := checkOAuthURL(s); msg != "" {
		return msg
	}
	if u, _ := url.Parse(s); u.RawQuery != "" {
		return fmt.Sprintf("%q has a query; a resource is the MCP endpoint's URI, such as \"https://mcp.example.com/mcp\"", s)
	}
	return ""
}

// checkOAuthURL accepts an https URL, or an http one on a loopback host
// (the only place a token can travel in the clear without being seen).
func checkOAuthURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Sprintf("%q is not an https:// URL", s)
	case u.Fragment != "" || u.User != nil:
		return fmt.Sprintf("%q must not have a fragment or a user name", s)
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return fmt.Sprintf("%q is plain http; OAuth needs https:// (plain http is accepted only on a loopback address)", s)
	}
	return ""
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func checkScope(s string) string {
	if s == "" || strings.ContainsAny(s, " \"\\") {
		return fmt.Sprintf("%q is not a scope; a scope is a non-empty word without spaces, quotes or backslashes", s)
	}
	return ""
}

func checkAlgorithm(s string) string {
	switch {
	case slices.Contains(acceptedAlgorithms, s):
		return ""
	case strings.EqualFold(s, "none"):
		return `"none" would accept unsigned tokens; it is never allowed`
	case strings.HasPrefix(strings.ToUpper(s), "HS"):
		return fmt.Sprintf("%s is a shared-secret algorithm: whoever can verify a token could forge one; use an asymmetric one: %s", s, strings.Join(acceptedAlgorithms, ", "))
	}
	return fmt.Sprintf("unknown algorithm %q; use some of %s", s, strings.Join(acceptedAlgorithms, ", "))
}
