package backend

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/config"
)

// Caller is who a client's call is sent for, as the gateway identified
// them: what a remote backend that exchanges tokens (oauth_token_exchange)
// needs, as plain values. The gateway puts it in the context of every
// call it sends for a client (see CallerKey); requests of the backend's
// own (its handshake, its lists, its pings) have none.
type Caller struct {
	// Identity is the caller's access.Caller.Identity ("oauth:ISSUER:sub:SUB",
	// "token:ID", "uid:UID", "" without auth): exchanged tokens are kept
	// per identity.
	Identity string
	// Subject is the client_claim of the caller's OAuth access token, ""
	// without one; Issuer is the issuer URL of that token.
	Subject, Issuer string
	// Token is the caller's validated OAuth access token, zero without
	// one: the subject token of the exchange, and sent nowhere else.
	Token Secret
}

// CallerKey is the context key of the *Caller a call is sent for.
type CallerKey struct{}

// callerOf returns the Caller of ctx, nil for a request of the backend's
// own.
func callerOf(ctx context.Context) *Caller {
	c, _ := ctx.Value(CallerKey{}).(*Caller)
	return c
}

// Secret is a token kept in memory only: fmt and slog show "[redacted]";
// Reveal is the one way to it.
type Secret struct{ raw string }

// NewSecret returns s as a Secret.
func NewSecret(s string) Secret { return Secret{raw: s} }

// Reveal returns the secret.
func (s Secret) Reveal() string { return s.raw }

// IsZero reports whether there is no secret.
func (s Secret) IsZero() bool { return s.raw == "" }

// String hides the secret.
func (Secret) String() string { return "[redacted]" }

// GoString hides the secret from %#v.
func (Secret) GoString() string { return "[redacted]" }

// LogValue hides the secret from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// The identities a call runs as upstream, as the audit entry's upstream
// attribute and the metrics' "as" label name them: bounded, so that the
// subject itself is only in the audit entry (upstream_subject).
const (
	// UpstreamExchanged is a call that carried a token exchanged for
	// the caller's (oauth_token_exchange).
	UpstreamExchanged = "exchanged"
	// UpstreamService is a call that carried the backend's own
	// credential: its client-credentials token, or what its
	// configuration sends every request.
	UpstreamService = "service"
	// UpstreamRefused is a call refused because its caller had no OAuth
	// access token to exchange (metrics only: no call ran).
	UpstreamRefused = "refused"
)

// NoOAuthTokenError refuses a call to a backend that exchanges its
// callers' tokens, for a caller without an OAuth access token.
type NoOAuthTokenError struct {
	Backend  string
	Identity string // the caller's access.Caller.Identity
}

func (e *NoOAuthTokenError) Error() string {
	who := "a caller without authentication"
	if e.Identity != "" {
		who = "caller " + e.Identity
	}
	return fmt.Sprintf("backend %q acts upstream as each caller, with a token exchanged for the caller's OAuth access token (oauth_token_exchange), but %s has no OAuth access token to exchange; "+
		"connect with an access token of the gateway's authorization server, or an administrator can set oauth_exchange_fallback = \"service\" for this backend to serve such callers as the gateway's own client", e.Backend, who)
}

// ForeignTokenError refuses a call to a backend that exchanges its
// callers' tokens, for a caller whose token another authorization server
// issued: a token is exchanged only at the server that issued it, never
// shown to another.
type ForeignTokenError struct {
	Backend, Identity string
	Issuer            string // the caller's token's
	Want              string // the backend's oauth_issuer
}

func (e *ForeignTokenError) Error() string {
	return fmt.Sprintf("backend %q exchanges its callers' tokens at %s (oauth_issuer), but caller %s has a token of %s, which the gateway does not send to another authorization server; "+
		"connect with a token of %s, or an administrator can point oauth_issuer at the server that issues the callers' tokens", e.Backend, e.Want, e.Identity, e.Issuer, e.Want)
}

// UpstreamOf says who a call of caller to b runs as upstream: as, one of
// UpstreamExchanged and UpstreamService ("" for a backend without OAuth
// toward its server, whose credential, if any, is its configuration's,
// and for a call it refuses), and, for an
// exchanged token, subject: the sub of the exchanged token when it is a
// JWT, else the caller's Subject. Never a token.
func (b *Backend) UpstreamOf(caller *Caller) (as, subject string) {
	switch {
	case !b.cfg.OAuthTokenExchange:
		if b.cfg.OAuthClientID != "" {
			return UpstreamService, ""
		}
		return "", ""
	case caller != nil && !caller.Token.IsZero() && b.cfg.OAuthIssuer != "" && caller.Issuer != b.cfg.OAuthIssuer:
		return "", "" // refused: see ForeignTokenError
	case caller != nil && !caller.Token.IsZero():
		return UpstreamExchanged, b.exchangedSubject(caller)
	case b.cfg.OAuthExchangeFallback == config.ExchangeService:
		return UpstreamService, ""
	}
	return "", ""
}

// upstreamCounts counts a backend's calls by who they ran as upstream.
type upstreamCounts struct {
	exchanged, service, refused atomic.Uint64
}

// countUpstream counts a call of caller to b, which exchanges tokens, by
// who it runs as, and refuses it when caller has no OAuth access token
// and b no fallback, or a token of another issuer than b's oauth_issuer.
func (b *Backend) countUpstream(caller *Caller) error {
	switch {
	case !caller.Token.IsZero() && b.cfg.OAuthIssuer != "" && caller.Issuer != b.cfg.OAuthIssuer:
		b.upstream.refused.Add(1)
		return &ForeignTokenError{Backend: b.name, Identity: caller.Identity, Issuer: caller.Issuer, Want: b.cfg.OAuthIssuer}
	case !caller.Token.IsZero():
		b.upstream.exchanged.Add(1)
	case b.cfg.OAuthExchangeFallback == config.ExchangeService:
		b.upstream.service.Add(1)
	default:
		b.upstream.refused.Add(1)
		return &NoOAuthTokenError{Backend: b.name, Identity: caller.Identity}
	}
	return nil
}

// UpstreamCalls returns how many calls of clients b sent with an
// exchanged token, with its own token, and refused for want of a caller's
// OAuth token; ok is false for a backend that does not exchange tokens,
// which counts none.
func (b *Backend) UpstreamCalls() (exchanged, service, refused uint64, ok bool) {
	if !b.cfg.OAuthTokenExchange {
		return 0, 0, 0, false
	}
	return b.upstream.exchanged.Load(), b.upstream.service.Load(), b.upstream.refused.Load(), true
}
