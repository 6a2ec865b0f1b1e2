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

	mu     sync.Mutex // one token request at a time; guards what follows
	token  string
	expiry time.Time
	renew  time.Time // when to get the next one
}

// maxOAuthAnswer bounds a metadata or token answer.
const maxOAuthAnswer = 1 << 20

// newTokenSource returns the token source of b's OAuth keys, checking
// that its credential can be read. The credential is read again for every
// token request, so that a rotated secret or key is used from the next
// one on.
func newTokenSource(b *Backend) (*tokenSource, error) {
	cfg := b.cfg.RemoteOAuth
	s := &tokenSource{cfg: cfg, url: b.cfg.URL, creds: b.opts.CredentialsDirectory, endpoint: cfg.OAuthTokenEndpoint, log: b.opts.Logger,
		http: &http.Client{Timeout: 30 * time.Second,
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
// new one (or the one another request got meanwhile).
func (s *tokenSource) Refused(ctx context.Context, token string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != token && s.token != "" && time.Now().Before(s.renew) {
		return s.token, nil
	}
	s.token = ""
	return s.fetch(ctx)
}

// fetch gets a new token. s.mu is held.
func (s *tokenSource) fetch(ctx context.Context) (string, error) {
	if s.endpoint == "" {
		ep, err := s.discover(ctx)
		if err != nil {
			return "", err
		}
		s.endpoint = ep
	}
	secret, key, err := s.credential()
	if err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {s.cfg.OAuthResource}}
	if len(s.cfg.OAuthScopes) > 0 {
		form.Set("scope", strings.Join(s.cfg.OAuthScopes, " "))
	}
	if key != nil {
		assertion, err := s.assertion(key)
		if err != nil {
			return "", err
		}
		form.Set("client_id", s.cfg.OAuthClientID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("token endpoint %s: %v", s.endpoint, err)
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
		return "", fmt.Errorf("token endpoint %s: %v", s.endpoint, err)
	}
	defer resp.Body.Close()
	var ans struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxOAuthAnswer)).Decode(&ans); err != nil && resp.StatusCode == http.StatusOK {
		return "", fmt.Errorf("token endpoint %s: not a JSON answer: %v", s.endpoint, err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("token endpoint %s refused client %q: %s %s: %s", s.endpoint, s.cfg.OAuthClientID, resp.Status, ans.Error, ans.Description)
	case ans.AccessToken == "" || !strings.EqualFold(ans.TokenType, "Bearer"):
		return "", fmt.Errorf("token endpoint %s answered no bearer token", s.endpoint)
	}
	life := time.Duration(ans.ExpiresIn) * time.Second
	if ans.ExpiresIn <= 0 {
		life = 5 * time.Minute // RFC 6749 leaves it to the server; ask again soon
	}
	s.token, s.expiry = ans.AccessToken, start.Add(life)
	// Renew once four fifths of its life passed, and never later than a
	// minute before it expires: requests on the way must not carry a token
	// that expires in flight.
	s.renew = start.Add(min(life*4/5, max(life-time.Minute, life/2)))
	s.log.Info("obtained an access token for the backend", "token_endpoint", s.endpoint, "expires", s.expiry.UTC().Format(time.RFC3339))
	return s.token, nil
}

// assertion signs a client assertion for private_key_jwt (RFC 7523
// section 2.2): short-lived, one use.
func (s *tokenSource) assertion(key *jose.JSONWebKey) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key.Key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("oauth_private_key_credential: %v", err)
	}
	now := time.Now()
	return jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: s.cfg.OAuthClientID, Subject: s.cfg.OAuthClientID, Audience: jwt.Audience{s.endpoint},
		ID: rand.Text(), IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
}

// discover finds the token endpoint: the server's protected resource
// metadata (RFC 9728) names its authorization server, whose metadata (RFC
// 8414, else OpenID Connect discovery) names the endpoint.
func (s *tokenSource) discover(ctx context.Context) (string, error) {
	u, err := url.Parse(s.url)
	if err != nil {
		return "", err
	}
	var prm struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	var errs []string
	for _, p := range []string{"/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.Path, "/"), "/.well-known/oauth-protected-resource"} {
		mu := url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}
		if err := s.getJSON(ctx, mu.String(), &prm); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if len(prm.AuthorizationServers) > 0 {
			break
		}
	}
	if len(prm.AuthorizationServers) == 0 {
		return "", fmt.Errorf("no authorization server in the server's resource metadata (%s); set oauth_token_endpoint", strings.Join(errs, "; "))
	}
	issuer := prm.AuthorizationServers[0]
	iu, err := url.Parse(issuer)
	if err != nil {
		return "", fmt.Errorf("authorization server %q: %v", issuer, err)
	}
	path := strings.TrimSuffix(iu.Path, "/")
	for _, p := range []string{"/.well-known/oauth-authorization-server" + path, path + "/.well-known/openid-configuration"} {
		mu := *iu
		mu.Path = p
		var md struct {
			Issuer        string `json:"issuer"`
			TokenEndpoint string `json:"token_endpoint"`
		}
		if err := s.getJSON(ctx, mu.String(), &md); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if md.Issuer == issuer && md.TokenEndpoint != "" {
			return md.TokenEndpoint, nil
		}
		errs = append(errs, mu.String()+" names another issuer or no token_endpoint")
	}
	return "", fmt.Errorf("no token endpoint for authorization server %s (%s); set oauth_token_endpoint", issuer, strings.Join(errs, "; "))
}

func (s *tokenSource) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxOAuthAnswer)).Decode(v)
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
	c.Transport = &tokenTransport{next: next, src: b.tokens.src}
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
