package backend

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// Token exchange (RFC 8693): for a backend with oauth_token_exchange, each
// call of a client carries a token the gateway got by exchanging the
// caller's own access token at the backend's authorization server, so
// that the server sees the caller's subject, not the gateway's client.
// The caller's token itself never leaves the gateway but in the exchange
// request; exchanged tokens are kept per caller identity until shortly
// before they expire, and never logged.

// Grant and token types of RFC 8693.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
)

// MaxExchangedTokens bounds the exchanged tokens a backend keeps, one per
// caller identity: past it, the one due for renewal first is dropped (and
// exchanged again when its caller calls next). Entries whose exchange is
// under way are never dropped, so the bound can be passed by as many.
const MaxExchangedTokens = 1024

// exchanger gets and keeps the exchanged tokens of one backend.
type exchanger struct {
	src *tokenSource // the backend's client: its credential, endpoint and retry interval

	mu      sync.Mutex
	entries map[string]*exchanged // by caller identity
}

// exchanged is the token of one caller identity.
type exchanged struct {
	mu       sync.Mutex // one exchange at a time per identity; guards what follows
	token    string
	subject  string // its sub, if a JWT; else the caller's Subject
	renew    time.Time
	obtained time.Time
	renewed  bool // the token replaced one the server refused
	// from is the SHA-256 of the subject token the failure below was
	// for: a caller with a new token is not held to an old one's failure.
	from     [32]byte
	failed   error
	failedAt time.Time
}

func newExchanger(src *tokenSource) *exchanger {
	return &exchanger{src: src, entries: map[string]*exchanged{}}
}

// entry returns the entry of identity, making it, and dropping the entry
// due for renewal first when the cache is full. An entry whose exchange
// is under way is not dropped: the scan does not wait for it.
func (x *exchanger) entry(identity string) *exchanged {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.entries[identity]; e != nil {
		return e
	}
	if len(x.entries) >= MaxExchangedTokens {
		var oldest string
		var at time.Time
		for id, e := range x.entries {
			if !e.mu.TryLock() {
				continue
			}
			r := e.renew
			e.mu.Unlock()
			if oldest == "" || r.Before(at) {
				oldest, at = id, r
			}
		}
		delete(x.entries, oldest)
	}
	e := &exchanged{}
	x.entries[identity] = e
	return e
}

// subject returns the upstream subject of identity's exchanged token, ""
// if there is none.
func (x *exchanger) subject(identity string) string {
	x.mu.Lock()
	e := x.entries[identity]
	x.mu.Unlock()
	if e == nil {
		return ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.subject
}

// Token returns caller's exchanged token, exchanging its access token if
// there is none valid for a while yet.
func (x *exchanger) Token(ctx context.Context, caller *Caller) (string, error) {
	e := x.entry(caller.Identity)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token != "" && time.Now().Before(e.renew) {
		return e.token, nil
	}
	e.renewed = false
	return x.exchange(ctx, e, caller)
}

// Refused drops token, which the server answered 401 to, and returns a
// new one (or the one another request got meanwhile). A token is renewed
// once so; when the renewed one is refused too within
// oauth_retry_interval of its exchange, it is not replaced before that
// interval ends: a server that refuses every exchanged token costs one
// exchange per caller and interval, not two per call.
func (x *exchanger) Refused(ctx context.Context, caller *Caller, token string) (string, error) {
	e := x.entry(caller.Identity)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token != token && e.token != "" && time.Now().Before(e.renew) {
		return e.token, nil
	}
	if e.token == token {
		e.token = ""
		if age := time.Since(e.obtained); e.renewed && age < x.src.cfg.OAuthRetryInterval {
			return "", &exchangeError{e.fail(x.src, caller, fmt.Errorf("the server refused (401) the token the gateway got %s ago in exchange for the caller's, after it refused the one before; check what the authorization server issues for oauth_resource %s", age.Round(time.Millisecond), x.src.cfg.OAuthResource))}
		}
	}
	tok, err := x.exchange(ctx, e, caller)
	e.renewed = err == nil
	return tok, err
}

// fail records err as the entry's failure for caller's current token and
// journals it. e.mu is held.
func (e *exchanged) fail(src *tokenSource, caller *Caller, err error) error {
	e.from, e.failed, e.failedAt = sha256.Sum256([]byte(caller.Token.Reveal())), err, time.Now()
	src.log.Warn(fmt.Sprintf("cannot exchange the caller's access token for the backend: %v; the next attempt for this caller is in %s (oauth_retry_interval), or as soon as it presents another token", err, src.cfg.OAuthRetryInterval),
		"err", err.Error(), "identity", caller.Identity)
	return err
}

// exchange asks the authorization server for a token for caller, unless
// the last attempt with the same subject token failed less than
// oauth_retry_interval ago. e.mu is held.
func (x *exchanger) exchange(ctx context.Context, e *exchanged, caller *Caller) (string, error) {
	subject := caller.Token.Reveal()
	if e.failed != nil {
		wait := x.src.cfg.OAuthRetryInterval - time.Since(e.failedAt)
		if wait > 0 && e.from == sha256.Sum256([]byte(subject)) {
			return "", &exchangeError{fmt.Errorf("%w; the gateway asks again in %s", e.failed, wait.Round(time.Second))}
		}
		e.failed = nil
	}
	op := x.src.tel.Internal(ctx, "oauth token exchange", x.src.backend)
	if op != nil {
		ctx = telemetry.Carry(ctx, op.Context())
	}
	ans, start, err := x.request(ctx, subject)
	op.EndErr(err)
	if err != nil {
		return "", &exchangeError{e.fail(x.src, caller, err)}
	}
	e.token, e.obtained = ans.AccessToken, start
	e.renew = renewAt(start, ans.lifetime())
	e.subject = jwtSubject(ans.AccessToken)
	if e.subject == "" {
		e.subject = caller.Subject
	}
	x.src.log.Info("exchanged the caller's access token for one for the backend", "identity", caller.Identity, "upstream_subject", e.subject,
		"expires", start.Add(ans.lifetime()).UTC().Format(time.RFC3339))
	return e.token, nil
}

// request sends the token exchange request for subject.
func (x *exchanger) request(ctx context.Context, subject string) (*tokenAnswer, time.Time, error) {
	endpoint, err := x.src.tokenEndpoint(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	cfg := x.src.cfg
	form := url.Values{"grant_type": {grantTokenExchange}, "subject_token": {subject}, "subject_token_type": {tokenTypeAccess},
		"requested_token_type": {tokenTypeAccess}, "resource": {cfg.OAuthResource}}
	if cfg.OAuthAudience != "" {
		form.Set("audience", cfg.OAuthAudience)
	}
	if len(cfg.OAuthScopes) > 0 {
		form.Set("scope", strings.Join(cfg.OAuthScopes, " "))
	}
	ans, start, err := x.src.post(ctx, endpoint, form, subject)
	if err == nil && ans.IssuedTokenType != "" && ans.IssuedTokenType != tokenTypeAccess {
		err = fmt.Errorf("token endpoint %s issued a %s, not an access token", endpoint, quoteClaim(ans.IssuedTokenType))
	}
	if err == nil && ans.AccessToken == subject {
		// A server that hands the caller's own token back would make the
		// gateway pass it through.
		err = fmt.Errorf("token endpoint %s answered the exchange with the caller's own token; the gateway never passes it through", endpoint)
	}
	return ans, start, err
}

// exchangeError is a failed exchange: the journal has its detail (the
// authorization server's words); clients learn only that it failed (see
// Cause).
type exchangeError struct{ err error }

func (e *exchangeError) Error() string { return e.err.Error() }
func (e *exchangeError) Unwrap() error { return e.err }

// jwtSubject returns the sub of token if it is a JWT, else "". The token
// is not verified: it comes from the authorization server the operator
// trusts, and its sub only names who the call ran as.
func jwtSubject(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Sub
}

// tokenEndpoint returns the token endpoint, discovering it if need be.
func (s *tokenSource) tokenEndpoint(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endpoint == "" {
		ep, err := s.discover(ctx)
		if err != nil {
			return "", err
		}
		s.endpoint = ep
	}
	return s.endpoint, nil
}

// exchangeTransport sends each request of a call with the caller's
// exchanged token, and the backend's own requests (and, with
// oauth_exchange_fallback = "service", the calls of callers without an
// OAuth token) with the backend's client-credentials token; once more
// with a new token after a 401. Tokens go to the backend's origin only.
type exchangeTransport struct {
	next     http.RoundTripper
	service  *tokenTransport
	x        *exchanger
	origin   string // scheme://host of the backend's endpoint
	fallback bool   // oauth_exchange_fallback = "service"
	issuer   string // oauth_issuer: the only issuer whose tokens are exchanged; "" with oauth_token_endpoint
	backend  string
}

func (t *exchangeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme+"://"+req.URL.Host != t.origin {
		return nil, fmt.Errorf("backend %q: the gateway sends tokens to %s only, not to %s", t.backend, t.origin, req.URL.Scheme+"://"+req.URL.Host)
	}
	ctx := req.Context()
	caller := callerOf(ctx)
	switch {
	case caller == nil, caller.Token.IsZero() && t.fallback:
		return t.service.RoundTrip(req)
	case caller.Token.IsZero():
		return nil, &NoOAuthTokenError{Backend: t.backend, Identity: caller.Identity}
	case t.issuer != "" && caller.Issuer != t.issuer:
		return nil, &ForeignTokenError{Backend: t.backend, Identity: caller.Identity, Issuer: caller.Issuer, Want: t.issuer}
	}
	tok, err := t.x.Token(ctx, caller)
	if err != nil {
		return nil, err
	}
	r := req.Clone(ctx)
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxOAuthAnswer))
	resp.Body.Close()
	if tok, err = t.x.Refused(ctx, caller, tok); err != nil {
		return nil, err
	}
	r = req.Clone(ctx)
	if req.GetBody != nil {
		if r.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.next.RoundTrip(r)
}

// exchangedSubject is UpstreamOf's subject of an exchanged call.
func (b *Backend) exchangedSubject(caller *Caller) string {
	b.tokens.mu.Lock()
	x := b.tokens.x
	b.tokens.mu.Unlock()
	if x != nil {
		if sub := x.subject(caller.Identity); sub != "" {
			return sub
		}
	}
	return caller.Subject
}
