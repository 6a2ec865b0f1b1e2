package backend

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// tokenSource gets the gateway's own access token for a remote backend with
// the client-credentials grant (RFC 6749 section 4.4), asking for the
// server's resource (RFC 8707), keeps it, and gets a new one before it
// expires and after the server refused it. The token never reaches a log,
// an error or the status: only its expiry does.
//
// golang.org/x/oauth2/clientcredentials does not fit: private_key_jwt needs
// a fresh client assertion for every token request, and a token the server
// refused must be dropped before its expiry.
type tokenSource struct {
	cfg      config.RemoteOAuth
	url      string // the backend's MCP endpoint, for discovery
	creds    string // the credentials directory, read for every token request
	http     *http.Client
	log      *slog.Logger
	endpoint string // the token endpoint, once known
	tel      *telemetry.Telemetry
	backend  string

	mu       sync.Mutex // one token request at a time; guards what follows
	token    string
	expiry   time.Time
	renew    time.Time // when to get the next one
	obtained time.Time // when the token was obtained
	// failed is the last failure to get a token (a refused request, a
	// failed discovery, a fresh token the server refused), and failedAt
	// when: no new attempt before oauth_retry_interval passed.
	failed   error
	failedAt time.Time
}

// maxOAuthAnswer bounds a metadata or token answer.
const maxOAuthAnswer = 1 << 20

// newTokenSource returns the token source of b's OAuth keys, checking
// that its credential can be read. The credential is read again for every
// token request, so that a rotated secret or key is used from the next
// one on.
func newTokenSource(b *Backend) (*tokenSource, error) {
	cfg := b.cfg.RemoteOAuth
	s := &tokenSource{cfg: cfg, url: b.cfg.URL, creds: b.opts.CredentialsDirectory, endpoint: cfg.OAuthTokenEndpoint, log: b.log,
		tel: b.opts.Telemetry, backend: b.name,
		http: &http.Client{Timeout: 30 * time.Second, Transport: b.opts.Telemetry.Transport(nil),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if _, _, err := s.credential(); err != nil {
		return nil, err
	}
	return s, nil
}

// credential reads the client secret, or the private key of
// private_key_jwt.
func (s *tokenSource) credential() (secret string, key *jose.JSONWebKey, err error) {
	if s.cfg.OAuthClientSecretCredential != "" {
		secret, err := config.ReadCredential(s.creds, s.cfg.OAuthClientSecretCredential)
		if err != nil {
			return "", nil, fmt.Errorf("oauth_client_secret_credential: %w", err)
		}
		return secret, nil, nil
	}
	pemText, err := config.ReadCredential(s.creds, s.cfg.OAuthPrivateKeyCredential)
	if err != nil {
		return "", nil, fmt.Errorf("oauth_private_key_credential: %w", err)
	}
	key, err = parsePrivateKey([]byte(pemText))
	if err != nil {
		return "", nil, fmt.Errorf("oauth_private_key_credential ${credential:%s}: %w", s.cfg.OAuthPrivateKeyCredential, err)
	}
	return "", key, nil
}

// parsePrivateKey reads a PEM private key and picks its JWS algorithm.
func parsePrivateKey(b []byte) (*jose.JSONWebKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("not a PEM private key")
	}
	var k any
	var err error
	switch blk.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("not a usable private key: %v", err)
	}
	var alg jose.SignatureAlgorithm
	switch k := k.(type) {
	case *rsa.PrivateKey:
		alg = jose.RS256
	case *ecdsa.PrivateKey:
		alg = jose.ES256
	case ed25519.PrivateKey:
		alg = jose.EdDSA
	default:
		return nil, fmt.Errorf("a %T key cannot sign a client assertion; use RSA, EC P-256 or Ed25519", k)
	}
	return &jose.JSONWebKey{Key: k.(crypto.Signer), Algorithm: string(alg)}, nil
}

// Expiry returns when the current token expires; zero without one.
func (s *tokenSource) Expiry() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expiry
}

// Token returns a token valid for a while yet, getting one if needed.
func (s *tokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && time.Now().Before(s.renew) {
		return s.token, nil
	}
	return s.fetch(ctx)
}

// Refused drops token, which the server answered 401 to, and returns a
// new one (or the one another request got meanwhile). A token the server
// refuses within oauth_retry_interval of getting it is not replaced
// before that interval ends: a server that refuses every token costs one
// token request per interval, not one per call.
func (s *tokenSource) Refused(ctx context.Context, token string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != token && s.token != "" && time.Now().Before(s.renew) {
		return s.token, nil
	}
	if s.token == token {
		s.token = ""
		if age := time.Since(s.obtained); age < s.cfg.OAuthRetryInterval {
			s.fail(fmt.Errorf("the server refused (401) the access token the gateway got %s ago from %s; check the client's grants and oauth_resource (%s)",
				age.Round(time.Millisecond), s.endpoint, s.cfg.OAuthResource))
		}
	}
	return s.fetch(ctx)
}

// fail records err as the last failure and journals it: once per
// oauth_retry_interval at most, since no attempt is made in between.
// s.mu is held.
func (s *tokenSource) fail(err error) error {
	s.failed, s.failedAt = err, time.Now()
	s.log.Warn(fmt.Sprintf("cannot get an access token for the backend: %v; the next attempt is in %s (oauth_retry_interval)", err, s.cfg.OAuthRetryInterval),
		"err", err.Error(), "token_endpoint", s.endpoint)
	return err
}

// fetch gets a new token, unless the last attempt failed less than
// oauth_retry_interval ago: then it returns that failure. s.mu is held.
func (s *tokenSource) fetch(ctx context.Context) (string, error) {
	if s.failed != nil {
		if wait := s.cfg.OAuthRetryInterval - time.Since(s.failedAt); wait > 0 {
			return "", fmt.Errorf("%w; the gateway asks again in %s", s.failed, wait.Round(time.Second))
		}
		s.failed = nil
	}
	// On a call's path (ctx names its span), the request is a span of
	// its own, the call's child.
	op := s.tel.Internal(ctx, "oauth token", s.backend)
	if op != nil {
		ctx = telemetry.Carry(ctx, op.Context())
	}
	tok, err := s.request(ctx)
	op.EndErr(err)
	if err != nil {
		return "", s.fail(err)
	}
	return tok, nil
}

// request asks the token endpoint, discovering it first if need be.
func (s *tokenSource) request(ctx context.Context) (string, error) {
	if s.endpoint == "" {
		ep, err := s.discover(ctx)
		if err != nil {
			return "", err
		}
		s.endpoint = ep
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {s.cfg.OAuthResource}}
	if len(s.cfg.OAuthScopes) > 0 {
		form.Set("scope", strings.Join(s.cfg.OAuthScopes, " "))
	}
	ans, start, err := s.post(ctx, s.endpoint, form, "")
	if err != nil {
		return "", err
	}
	life := ans.lifetime()
	s.token, s.expiry, s.obtained = ans.AccessToken, start.Add(life), start
	s.renew = renewAt(start, life)
	s.log.Info("obtained an access token for the backend", "token_endpoint", s.endpoint, "expires", s.expiry.UTC().Format(time.RFC3339))
	return s.token, nil
}

// tokenAnswer is a token endpoint's answer (RFC 6749 section 5.1, RFC
// 8693 section 2.2).
type tokenAnswer struct {
	AccessToken     string `json:"access_token"`
	TokenType       string `json:"token_type"`
	IssuedTokenType string `json:"issued_token_type"`
	ExpiresIn       int64  `json:"expires_in"`
	Error           string `json:"error"`
	Description     string `json:"error_description"`
}

// lifetime is how long the answer's token lives: 5 minutes when the
// server does not say (RFC 6749 leaves it to the server; ask again soon).
func (a *tokenAnswer) lifetime() time.Duration {
	if a.ExpiresIn <= 0 {
		return 5 * time.Minute
	}
	return time.Duration(a.ExpiresIn) * time.Second
}

// renewAt is when to renew a token obtained at start that lives life:
// once four fifths of its life passed, and never later than a minute
// before it expires: requests on the way must not carry a token that
// expires in flight.
func renewAt(start time.Time, life time.Duration) time.Time {
	return start.Add(min(life*4/5, max(life-time.Minute, life/2)))
}

// post sends form to the token endpoint, authenticated as the gateway's
// client, and returns its bearer token's answer and when it was asked.
// hide, if not "", is a secret of the form (a subject token) that must
// not show in an error even if the server echoes it.
func (s *tokenSource) post(ctx context.Context, endpoint string, form url.Values, hide string) (*tokenAnswer, time.Time, error) {
	secret, key, err := s.credential()
	if err != nil {
		return nil, time.Time{}, err
	}
	if key != nil {
		assertion, err := s.assertion(key, endpoint)
		if err != nil {
			return nil, time.Time{}, err
		}
		form.Set("client_id", s.cfg.OAuthClientID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("token endpoint %s: %v", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if key == nil {
		// RFC 6749 section 2.3.1: both parts form-encoded first.
		req.SetBasicAuth(url.QueryEscape(s.cfg.OAuthClientID), url.QueryEscape(secret))
	}
	start := time.Now()
	resp, err := s.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, time.Time{}, fmt.Errorf("token endpoint %s: %v", endpoint, err)
	}
	defer resp.Body.Close()
	var ans tokenAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxOAuthAnswer)).Decode(&ans); err != nil && resp.StatusCode == http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("token endpoint %s: not a JSON answer: %v", endpoint, err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		detail := ans.Error + ": " + ans.Description
		if hide != "" {
			detail = strings.ReplaceAll(detail, hide, "[redacted]")
		}
		return nil, time.Time{}, fmt.Errorf("token endpoint %s refused client %q: %s %s", endpoint, s.cfg.OAuthClientID, resp.Status, detail)
	case ans.AccessToken == "" || !strings.EqualFold(ans.TokenType, "Bearer"):
		return nil, time.Time{}, fmt.Errorf("token endpoint %s answered no bearer token", endpoint)
	}
	return &ans, start, nil
}

// assertion signs a client assertion for private_key_jwt (RFC 7523
// section 2.2): short-lived, one use.
func (s *tokenSource) assertion(key *jose.JSONWebKey, endpoint string) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key.Key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("oauth_private_key_credential: %v", err)
	}
	now := time.Now()
	return jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: s.cfg.OAuthClientID, Subject: s.cfg.OAuthClientID, Audience: jwt.Audience{endpoint},
		ID: rand.Text(), IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
}

// tokenTransport sends every request to the server with the gateway's own
// token, and once more with a new token after a 401.
type tokenTransport struct {
	next http.RoundTripper
	src  *tokenSource
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tok, err := t.src.Token(ctx)
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
	tok, err = t.src.Refused(ctx, tok)
	if err != nil {
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

// tokenHolder keeps a backend's token source across reconnections, so
// that a reconnection does not cost a token request.
type tokenHolder struct {
	mu  sync.Mutex
	src *tokenSource
	x   *exchanger // with oauth_token_exchange
}

// withToken returns hc sending the backend's own OAuth token, when it has
// oauth_client_id; else hc.
func (b *Backend) withToken(hc *http.Client) (*http.Client, error) {
	if b.cfg.OAuthClientID == "" {
		return hc, nil
	}
	b.tokens.mu.Lock()
	defer b.tokens.mu.Unlock()
	if b.tokens.src == nil {
		src, err := newTokenSource(b)
		if err != nil {
			return nil, err
		}
		b.tokens.src = src
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c := *hc
	service := &tokenTransport{next: next, src: b.tokens.src}
	c.Transport = service
	if b.cfg.OAuthTokenExchange {
		if b.tokens.x == nil {
			b.tokens.x = newExchanger(b.tokens.src)
		}
		u, err := url.Parse(b.cfg.Endpoint())
		if err != nil {
			return nil, err
		}
		c.Transport = &exchangeTransport{next: next, service: service, x: b.tokens.x, origin: u.Scheme + "://" + u.Host,
			fallback: b.cfg.OAuthExchangeFallback == config.ExchangeService, issuer: b.cfg.OAuthIssuer, backend: b.name}
	}
	return &c, nil
}

// TokenExpiry returns when the backend's own OAuth access token expires:
// zero if it has none (yet). The token itself is never shown.
func (b *Backend) TokenExpiry() time.Time {
	b.tokens.mu.Lock()
	src := b.tokens.src
	b.tokens.mu.Unlock()
	if src == nil {
		return time.Time{}
	}
	return src.Expiry()
}
