package config

import (
	"maps"
	"slices"
	"time"
)

// RemoteOAuth holds the keys of a remote backend that gets its own OAuth
// access token with the client-credentials grant: the backend's server is
// an OAuth resource server, and the gateway is one of its clients. A
// client's own token never reaches a backend.
type RemoteOAuth struct {
	OAuthClientID string // "" (default): no OAuth toward the server
	// OAuthClientSecretCredential holds the client secret
	// (client_secret_basic).
	OAuthClientSecretCredential string
	// OAuthPrivateKeyCredential holds a PEM private key that signs a
	// client assertion instead (private_key_jwt, RFC 7523).
	OAuthPrivateKeyCredential string
	// OAuthIssuer is the authorization server the operator trusts for the
	// server: its token endpoint is discovered from its RFC 8414 metadata,
	// which must name this issuer exactly. One of it and
	// OAuthTokenEndpoint is required: the secret goes only where the
	// operator said.
	OAuthIssuer        string
	OAuthTokenEndpoint string   // the token endpoint itself
	OAuthScopes        []string // scopes asked for
	OAuthResource      string   // the "resource" asked for (RFC 8707); default the url
	// OAuthRetryInterval is the least time between two token requests (or
	// discoveries) that follow a failure: a refused token request, a
	// failed discovery, or a 401 to a token that fresh; default 30s.
	OAuthRetryInterval time.Duration
	TokenExchange
}

// TokenExchange holds the keys of a remote backend that acts, for each
// call, as the caller: the caller's validated access token (of an
// [oauth] issuer) is exchanged at the backend's authorization server for
// one of the same subject for the backend (RFC 8693), the gateway
// authenticating as oauth_client_id. The backend's own requests (its
// handshake, its lists) carry the client-credentials token of
// oauth_client_id.
type TokenExchange struct {
	OAuthTokenExchange bool   // false (default): every call as the gateway's client
	OAuthAudience      string // the "audience" asked for, if the server wants one; "" (default): none
	// OAuthExchangeFallback is what a call of a caller without an OAuth
	// access token (a static token, a unix peer) runs as: "refuse"
	// (default) or "service", the backend's own client-credentials token.
	OAuthExchangeFallback string
}

// Exchange fallbacks.
const (
	ExchangeRefuse  = "refuse"
	ExchangeService = "service"
)

// remoteOAuthKeys are the keys of RemoteOAuth, which apply to a remote
// backend only.
var remoteOAuthKeys = []string{"oauth_client_id", "oauth_client_secret_credential", "oauth_private_key_credential",
	"oauth_issuer", "oauth_token_endpoint", "oauth_scopes", "oauth_resource", "oauth_retry_interval",
	"oauth_token_exchange", "oauth_audience", "oauth_exchange_fallback"}

// exchangeOnlyKeys are the keys that mean something only with
// oauth_token_exchange = true.
var exchangeOnlyKeys = []string{"oauth_audience", "oauth_exchange_fallback"}

// DefaultOAuthRetryInterval is oauth_retry_interval's default.
const DefaultOAuthRetryInterval = 30 * time.Second

func (r *RemoteOAuth) remoteOAuthEqual(o *RemoteOAuth) bool {
	return r.OAuthClientID == o.OAuthClientID && r.OAuthClientSecretCredential == o.OAuthClientSecretCredential &&
		r.OAuthPrivateKeyCredential == o.OAuthPrivateKeyCredential && r.OAuthIssuer == o.OAuthIssuer &&
		r.OAuthTokenEndpoint == o.OAuthTokenEndpoint && slices.Equal(r.OAuthScopes, o.OAuthScopes) &&
		r.OAuthResource == o.OAuthResource && r.OAuthRetryInterval == o.OAuthRetryInterval && r.TokenExchange == o.TokenExchange
}

func remoteOAuthFields() []field[Backend] {
	return []field[Backend]{
		{"oauth_client_id", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthClientID, checkNotEmpty)
		}},
		{"oauth_client_secret_credential", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthClientSecretCredential, checkCredentialName)
		}},
		{"oauth_private_key_credential", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthPrivateKeyCredential, checkCredentialName)
		}},
		{"oauth_issuer", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthIssuer, checkOAuthURL)
		}},
		{"oauth_retry_interval", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.OAuthRetryInterval)
		}},
		{"oauth_token_endpoint", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthTokenEndpoint, checkOAuthURL)
		}},
		{"oauth_scopes", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.strList(at, v, &b.OAuthScopes, checkScope)
		}},
		{"oauth_resource", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthResource, checkResource)
		}},
		{"oauth_token_exchange", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.boolean(at, v, &b.OAuthTokenExchange)
		}},
		{"oauth_audience", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthAudience, checkNotEmpty)
		}},
		{"oauth_exchange_fallback", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.OAuthExchangeFallback, oneOf(ExchangeRefuse, ExchangeService))
		}},
	}
}

// checkRemoteOAuth checks that the OAuth keys of a remote backend agree.
func (d *decoder) checkRemoteOAuth(at keyPath, t map[string]any, b *Backend) {
	has := func(k string) bool { _, ok := t[k]; return ok }
	secret, key := has("oauth_client_secret_credential"), has("oauth_private_key_credential")
	switch {
	case !has("oauth_client_id"):
		for _, k := range remoteOAuthKeys[1:] {
			if has(k) {
				d.fail(at.child(k), "%s needs oauth_client_id, the gateway's client id at the server's authorization server; set it, or remove %s", k, k)
				return
			}
		}
	case secret == key:
		d.fail(at.child("oauth_client_id"), "set one of oauth_client_secret_credential (a client secret) and oauth_private_key_credential (private_key_jwt): how the gateway authenticates at the token endpoint")
	case !has("oauth_issuer") && !has("oauth_token_endpoint"):
		// The server's own metadata names an authorization server, and
		// the gateway's secret would go wherever a hostile server says.
		d.fail(at.child("oauth_client_id"), "set oauth_issuer, the issuer URL of the authorization server you trust for this server (its token endpoint is discovered from its metadata), or oauth_token_endpoint: the client secret goes only where the configuration says")
	case has("oauth_issuer") && has("oauth_token_endpoint"):
		d.fail(at.child("oauth_issuer"), "set oauth_issuer or oauth_token_endpoint, not both: the token endpoint is the configured one, or the one the issuer's metadata names")
	case has("headers"):
		if _, ok := b.Headers["Authorization"]; ok {
			d.fail(at.child("headers"), "headers sets Authorization, which the OAuth token (oauth_client_id) sets; remove one")
		}
	}
	if b.OAuthClientID != "" && b.OAuthResource == "" && b.UnixSocket() != "" {
		d.fail(at.child("oauth_client_id"), "a server on a unix socket has no URL its tokens could name: set oauth_resource, the resource its authorization server issues them for")
		return
	}
	if b.OAuthClientID != "" && b.OAuthResource == "" {
		b.OAuthResource = b.URL
	}
	if b.OAuthClientID != "" && b.OAuthRetryInterval == 0 {
		b.OAuthRetryInterval = DefaultOAuthRetryInterval
	}
	if !b.OAuthTokenExchange {
		for _, k := range exchangeOnlyKeys {
			if has(k) {
				d.fail(at.child(k), "%s applies only to a backend that exchanges its callers' tokens; set oauth_token_exchange = true, or remove %s", k, k)
			}
		}
		return
	}
	if b.OAuthExchangeFallback == "" {
		b.OAuthExchangeFallback = ExchangeRefuse
	}
}

// checkTokenExchange checks that a backend with oauth_token_exchange can
// ever get a token to exchange: the gateway must accept OAuth tokens.
func (l *loader) checkTokenExchange(cfg *Config) {
	if cfg.OAuth.Enabled() {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Backends)) {
		if b := cfg.Backends[name]; b.OAuthTokenExchange {
			l.add(0, &Error{File: b.File, Line: b.Line, Key: "backends." + name + ".oauth_token_exchange",
				Msg: "oauth_token_exchange exchanges the caller's OAuth access token, but no [oauth.issuers.NAME] is configured, so no caller has one; add an issuer, or remove oauth_token_exchange"})
		}
	}
}
