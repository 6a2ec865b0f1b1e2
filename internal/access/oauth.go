package access

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgate/mcpgate/internal/config"
)

// MaxTokenBytes is the longest access token the gateway looks at; a longer
// one is refused unread. Real JWTs are a few hundred bytes to a few KiB.
const MaxTokenBytes = 8192

// OAuth is the gateway as an OAuth 2.1 resource server: it validates the
// access tokens of the configured issuers, as JWTs signed with a key of
// the issuer's JWKS or by RFC 7662 introspection, and remembers validated
// tokens until they expire. It is safe for concurrent use and lives as long
// as its configuration does (a reload that leaves [oauth] alone keeps it,
// with its caches).
type OAuth struct {
	cfg       config.OAuth
	endpoint  string
	resources map[string]string  // by listener address; see ListenerResources
	byIss     map[string]*issuer // JWT issuers by "iss"
	intro     []*issuer          // issuers checked by introspection
	algs      []jose.SignatureAlgorithm
	cache     *tokenCache
	now       func() time.Time
}

// issuer is one trusted authorization server.
type issuer struct {
	cfg    *config.Issuer
	algs   []jose.SignatureAlgorithm
	keys   *keySet         // JWT issuers
	intro  *introspector   // introspection issuers
	claims map[string]bool // the claim names mapping lists: client_claim, groups_claim
}

// Grant is what a validated access token says about its holder.
type Grant struct {
	Issuer  string    // name of the [oauth.issuers.NAME]
	Subject string    // value of the issuer's client_claim
	Groups  []string  // values of its groups_claim
	Scopes  []string  // the token's scopes
	Expiry  time.Time // when the token stops being valid
	// Identity is the Caller.Identity of the token's holder:
	// "oauth:ISSUER:sub:SUB" by the token's sub, else
	// "oauth:ISSUER:claim:VALUE" by its client_claim, else
	// "oauth:ISSUER:token:ID" by the token itself.
	Identity string
}

// TokenError says why a token was refused. Its text never holds the token.
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return e.Reason }

func tokenErrorf(format string, args ...any) *TokenError {
	return &TokenError{fmt.Sprintf(format, args...)}
}

// NewOAuth returns the resource server of cfg, or nil if cfg names no
// issuer. resources is the resource of each listener (ListenerResources).
// credentials is where client_secret_credential is read; a secret that
// cannot be read is an error, and the issuer it belongs to then refuses
// every token until a reload.
func NewOAuth(cfg *config.Config, resources map[string]string, credentials string) (*OAuth, error) {
	if !cfg.OAuth.Enabled() {
		return nil, nil
	}
	o := &OAuth{cfg: cfg.OAuth, endpoint: cfg.Gateway.Endpoint, resources: resources, byIss: map[string]*issuer{}, now: time.Now}
	o.cache = newTokenCache(cfg.OAuth.TokenCacheSize)
	client := &http.Client{
		Timeout: cfg.OAuth.HTTPTimeout,
		// Metadata, keys and introspection answers come from where they
		// were asked: a redirect could lead the gateway anywhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var errs []error
	seen := map[jose.SignatureAlgorithm]bool{}
	for _, name := range slices.Sorted(maps.Keys(cfg.OAuth.Issuers)) {
		ic := cfg.OAuth.Issuers[name]
		is := &issuer{cfg: ic, claims: map[string]bool{ic.ClientClaim: true, ic.GroupsClaim: true}}
		if ic.IntrospectionEndpoint != "" {
			secret, err := config.ReadCredential(credentials, ic.ClientSecretCredential)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: issuer %q: client secret: %w", ic.File, ic.Line, name, err))
			}
			is.intro = &introspector{endpoint: ic.IntrospectionEndpoint, clientID: ic.ClientID, secret: secret, ok: err == nil, client: client}
			o.intro = append(o.intro, is)
			continue
		}
		for _, a := range ic.Algorithms {
			alg := jose.SignatureAlgorithm(a)
			is.algs = append(is.algs, alg)
			if !seen[alg] {
				seen[alg] = true
				o.algs = append(o.algs, alg)
			}
		}
		is.keys = newKeySet(ic.Issuer, ic.JWKSURI, client, cfg.OAuth.JWKSRefreshInterval, cfg.OAuth.JWKSMaxAge)
		o.byIss[ic.Issuer] = is
	}
	return o, errors.Join(errs...)
}

// Config returns the configuration o was made from.
func (o *OAuth) Config() *config.OAuth { return &o.cfg }

// Issuers returns the issuer URLs, sorted, as the resource metadata lists
// them.
func (o *OAuth) Issuers() []string {
	var out []string
	for _, ic := range o.cfg.Issuers {
		out = append(out, ic.Issuer)
	}
	slices.Sort(out)
	return out
}

// Validate checks token as an access token for resource and returns what
// it grants. A refused token yields a *TokenError.
func (o *OAuth) Validate(ctx context.Context, token, resource string) (*Grant, error) {
	return o.validateHashed(ctx, token, sha256.Sum256([]byte(token)), resource)
}

// validateHashed is Validate with the token's SHA-256, key computed.
func (o *OAuth) validateHashed(ctx context.Context, token string, key [32]byte, resource string) (*Grant, error) {
	if len(token) > MaxTokenBytes {
		return nil, tokenErrorf("the token is %d bytes, longer than any this gateway accepts (%d)", len(token), MaxTokenBytes)
	}
	now := o.now()
	if g := o.cache.get(key, resource, now); g != nil {
		return g, nil
	}
	g, err := o.validate(ctx, token, resource, now)
	if err != nil {
		return nil, err
	}
	if g.Identity == "" {
		g.Identity = "oauth:" + g.Issuer + ":token:" + hex.EncodeToString(key[:6])
	}
	o.cache.put(key, resource, g)
	return g, nil
}

func (o *OAuth) validate(ctx context.Context, token, resource string, now time.Time) (*Grant, error) {
	var iss string
	tok, jwtErr := jwt.ParseSigned(token, o.algs)
	if jwtErr == nil {
		var c struct {
			Issuer string `json:"iss"`
		}
		if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
			jwtErr = err
		}
		iss = c.Issuer
	}
	if is := o.byIss[iss]; jwtErr == nil && is != nil {
		return o.validateJWT(ctx, is, tok, resource, now)
	}
	if len(o.intro) > 0 && (jwtErr != nil || len(o.byIss) == 0 || o.introIssuer(iss) != nil) {
		is := o.introIssuer(iss)
		if is == nil {
			is = o.intro[0]
		}
		return o.introspect(ctx, is, token, resource, now)
	}
	switch {
	case jwtErr != nil:
		return nil, tokenErrorf("not a JWT signed with an accepted algorithm (%s): %v", algNames(o.algs), redactJOSE(jwtErr))
	default:
		return nil, tokenErrorf("issuer %s is not trusted; trusted issuers: %s", quoteShort(iss), strings.Join(o.Issuers(), ", "))
	}
}

// introIssuer returns the introspection issuer whose URL is iss, or nil.
func (o *OAuth) introIssuer(iss string) *issuer {
	for _, is := range o.intro {
		if is.cfg.Issuer == iss {
			return is
		}
	}
	return nil
}

// validateJWT checks tok's signature with the issuer's keys and its
// claims.
func (o *OAuth) validateJWT(ctx context.Context, is *issuer, tok *jwt.JSONWebToken, resource string, now time.Time) (*Grant, error) {
	if len(tok.Headers) != 1 {
		return nil, tokenErrorf("the JWT has %d signatures; an access token has one", len(tok.Headers))
	}
	h := tok.Headers[0]
	alg := jose.SignatureAlgorithm(h.Algorithm)
	if !slices.Contains(is.algs, alg) {
		return nil, tokenErrorf("algorithm %s is not accepted for issuer %q (algorithms = %s)", quoteShort(h.Algorithm), is.cfg.Name, algNames(is.algs))
	}
	key, err := is.keys.key(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	extra := map[string]any{}
	if err := tok.Claims(key.Key, &std, &extra); err != nil {
		return nil, tokenErrorf("bad signature or claims (key %s of issuer %q): %v", quoteShort(key.KeyID), is.cfg.Name, redactJOSE(err))
	}
	if std.Expiry == nil {
		return nil, tokenErrorf("the token has no exp; access tokens must expire")
	}
	auds := o.audiences(is, resource)
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: is.cfg.Issuer, AnyAudience: auds, Time: now}, o.cfg.Leeway)
	if err != nil {
		return nil, claimError(err, &std, auds, now)
	}
	return is.grant(extra, std.Subject, std.Expiry.Time()), nil
}

// audiences returns the "aud" values a token must hold one of.
func (o *OAuth) audiences(is *issuer, resource string) jwt.Audience {
	if len(is.cfg.Audiences) > 0 {
		return is.cfg.Audiences
	}
	return jwt.Audience{resource}
}

// claimError explains a failed claim check, with the values that failed.
func claimError(err error, c *jwt.Claims, auds jwt.Audience, now time.Time) *TokenError {
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return tokenErrorf("the token expired at %s (now %s)", c.Expiry.Time().UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return tokenErrorf("the token is not valid before %s (nbf)", c.NotBefore.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return tokenErrorf("the token was issued in the future, at %s (iat); check the clocks", c.IssuedAt.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrInvalidAudience):
		var got []string
		for _, a := range c.Audience {
			got = append(got, quoteShort(a))
		}
		return tokenErrorf("the token is for audience [%s], not for this resource (%s); the client must ask for the token with resource=%s (RFC 8707)",
			strings.Join(got, ", "), strings.Join(auds, ", "), auds[0])
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return tokenErrorf("the token's issuer %s is not the expected one", quoteShort(c.Issuer))
	}
	return tokenErrorf("invalid claims: %v", err)
}

// grant builds the Grant of a valid token's claims.
func (is *issuer) grant(claims map[string]any, sub string, exp time.Time) *Grant {
	g := &Grant{Issuer: is.cfg.Name, Expiry: exp}
	switch v := claims[is.cfg.ClientClaim].(type) {
	case string:
		g.Subject = v
	case nil:
		if is.cfg.ClientClaim == "sub" {
			g.Subject = sub
		}
	}
	g.Groups = stringsOf(claims[is.cfg.GroupsClaim])
	switch { // each kind of value tagged, so that no value of one is one of another
	case sub != "":
		g.Identity = "oauth:" + is.cfg.Name + ":sub:" + sub
	case g.Subject != "":
		g.Identity = "oauth:" + is.cfg.Name + ":claim:" + g.Subject
	}
	if s, ok := claims["scope"].(string); ok { // RFC 8693, RFC 9068
		g.Scopes = strings.Fields(s)
	} else {
		g.Scopes = stringsOf(claims["scp"]) // as some issuers spell it
	}
	return g
}

// stringsOf returns the strings of a claim that is a string or an array of
// them.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// HasScopes returns the scopes of want that g lacks.
func (g *Grant) missingScopes(want []string) []string {
	var missing []string
	for _, s := range want {
		if !slices.Contains(g.Scopes, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

func algNames(algs []jose.SignatureAlgorithm) string {
	names := make([]string, len(algs))
	for i, a := range algs {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// quoteShort quotes a value taken from a token for a log line, cut short:
// the token is the caller's, and so is what it holds.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// redactJOSE returns err's message: go-jose's errors name what failed,
// never the token's bytes.
func redactJOSE(err error) string {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}
