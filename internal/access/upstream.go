package access

import (
	"context"
	"log/slog"
)

// AccessToken is an OAuth access token a caller presented, kept only in
// memory so that a backend can exchange it (RFC 8693). It never prints:
// fmt and slog show "[redacted]"; Reveal is the one way to the token.
type AccessToken struct{ raw string }

// NewAccessToken returns raw as an AccessToken: the resource server's,
// and a test's that plays it.
func NewAccessToken(raw string) AccessToken { return AccessToken{raw: raw} }

// Reveal returns the token, for the token exchange request alone.
func (t AccessToken) Reveal() string { return t.raw }

// IsZero reports whether there is no token.
func (t AccessToken) IsZero() bool { return t.raw == "" }

// String hides the token.
func (t AccessToken) String() string { return "[redacted]" }

// GoString hides the token from %#v.
func (t AccessToken) GoString() string { return "[redacted]" }

// LogValue hides the token from slog.
func (t AccessToken) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// CallerKey is the context key under which the front keeps the Caller it
// identified for an HTTP request (a *Caller): CallerOf reads it.
type CallerKey struct{}

// CallerOf returns the Caller of the request ctx belongs to, as the
// front identified it, and false when it identified none (auth =
// "none", or a context of the gateway's own).
func CallerOf(ctx context.Context) (*Caller, bool) {
	c, ok := ctx.Value(CallerKey{}).(*Caller)
	return c, ok && c != nil
}
