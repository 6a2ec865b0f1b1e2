package backend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// exchangeServer is an authorization server with the client-credentials
// and token-exchange grants, and the MCP endpoint it issues tokens for,
// which records who each request came as.
type exchangeServer struct {
	srv *httptest.Server

	mu        sync.Mutex
	exchanges map[string]int  // exchanges by subject token
	services  int             // client-credentials tokens issued
	valid     map[string]bool // tokens the MCP endpoint accepts
	subjectOf map[string]string
	refuse    map[string]bool // subjects whose first exchanged token the endpoint refuses
	never     map[string]bool // subjects whose exchanged tokens it always refuses
	seen      []string        // the subject of each request the endpoint accepted
	sawAuth   []string        // every Authorization header the endpoint got
	echo      bool            // the token endpoint's errors quote the subject token
	passBack  bool            // the token endpoint answers an exchange with the subject token itself
}

// jwtOf makes an unsigned JWT-shaped token naming sub, as an
// authorization server's would: the gateway reads, not verifies, its sub.
func jwtOf(sub string, n int) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]any{"sub": sub, "n": n})
	return enc([]byte(`{"alg":"ES256"}`)) + "." + enc(claims) + ".sig"
}

func newExchangeServer(t *testing.T) *exchangeServer {
	es := &exchangeServer{exchanges: map[string]int{}, valid: map[string]bool{}, subjectOf: map[string]string{}, refuse: map[string]bool{}, never: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		id, secret, _ := r.BasicAuth()
		es.mu.Lock()
		defer es.mu.Unlock()
		if id != "gw" || secret != "gw-secret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		var token, sub string
		switch r.Form.Get("grant_type") {
		case "client_credentials":
			es.services++
			token, sub = "service-"+strconv.Itoa(es.services), "gw"
		case grantTokenExchange:
			subject := r.Form.Get("subject_token")
			user, ok := strings.CutPrefix(subject, "user-token-")
			if !ok || r.Form.Get("subject_token_type") != tokenTypeAccess || r.Form.Get("resource") != es.srv.URL+"/mcp" ||
				r.Form.Get("audience") != "mcp-up" || r.Form.Get("scope") != "mcp:tools" {
				desc := "bad exchange request"
				if es.echo {
					desc += " for subject_token " + subject
				}
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": desc})
				return
			}
			es.exchanges[subject]++
			token, sub = jwtOf(user, es.exchanges[subject]), user
			if es.passBack {
				token = subject
			}
		}
		es.valid[token] = !es.never[sub] && (!es.refuse[sub] || es.exchanges["user-token-"+sub] > 1)
		es.subjectOf[token] = sub
		json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600,
			"issued_token_type": tokenTypeAccess})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		auth := r.Header.Get("Authorization")
		token := strings.TrimPrefix(auth, "Bearer ")
		es.mu.Lock()
		defer es.mu.Unlock()
		es.sawAuth = append(es.sawAuth, auth)
		if !es.valid[token] {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		es.seen = append(es.seen, es.subjectOf[token])
		w.Write([]byte("ok"))
	})
	es.srv = httptest.NewServer(mux)
	t.Cleanup(es.srv.Close)
	return es
}

// backend returns a backend of es that exchanges its callers' tokens,
// its HTTP client and its log.
func (es *exchangeServer) backend(t *testing.T, fallback string) (*Backend, *http.Client, *testutil.Buffer) {
	t.Helper()
	return es.backendOf(t, fallback, "")
}

// backendOf is backend with oauth_issuer issuer (its token endpoint
// still es's).
func (es *exchangeServer) backendOf(t *testing.T, fallback, issuer string) (*Backend, *http.Client, *testutil.Buffer) {
	t.Helper()
	creds := t.TempDir()
	os.WriteFile(filepath.Join(creds, "secret"), []byte("gw-secret\n"), 0o600)
	cfg := &config.Backend{Name: "up", Remote: config.Remote{URL: es.srv.URL + "/mcp", RemoteOAuth: config.RemoteOAuth{
		OAuthClientID: "gw", OAuthClientSecretCredential: "secret", OAuthScopes: []string{"mcp:tools"}, OAuthResource: es.srv.URL + "/mcp",
		OAuthTokenEndpoint: es.srv.URL + "/token", OAuthRetryInterval: time.Hour, OAuthIssuer: issuer,
		TokenExchange: config.TokenExchange{OAuthTokenExchange: true, OAuthAudience: "mcp-up", OAuthExchangeFallback: fallback}}}}
	log := &testutil.Buffer{}
	b := New(cfg, Options{CredentialsDirectory: creds, Logger: slog.New(slog.NewTextHandler(log, nil))})
	hc, err := b.withToken(es.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return b, hc, log
}

// post sends one request to the MCP endpoint for caller (nil: the
// backend's own request).
func (es *exchangeServer) post(hc *http.Client, caller *Caller) error {
	ctx := context.Background()
	if caller != nil {
		ctx = context.WithValue(ctx, CallerKey{}, caller)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, es.srv.URL+"/mcp", strings.NewReader("{}"))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func user(name string) *Caller {
	return &Caller{Identity: "oauth:corp:sub:" + name, Subject: name, Token: NewSecret("user-token-" + name)}
}

// TestTokenExchange: each caller's calls carry a token exchanged for
// their own, kept until it is due for renewal, renewed once after a 401;
// the backend's own requests carry its client-credentials token; the
// callers' tokens never reach the server, an error or the log.
func TestTokenExchange(t *testing.T) {
	es := newExchangeServer(t)
	es.refuse["bob"] = true // the server refuses bob's first exchanged token
	b, hc, log := es.backend(t, config.ExchangeRefuse)
	alice, bob := user("alice"), user("bob")

	for _, c := range []*Caller{alice, bob, alice, nil, bob, alice} {
		if err := es.post(hc, c); err != nil {
			t.Fatalf("a request for %v: %v", c, err)
		}
	}
	es.mu.Lock()
	if strings.Join(es.seen, " ") != "alice bob alice gw bob alice" {
		t.Errorf("the server saw %q, want each caller's own subject, the backend's own request as gw", es.seen)
	}
	if es.exchanges["user-token-alice"] != 1 || es.exchanges["user-token-bob"] != 2 || es.services != 1 {
		t.Errorf("exchanges %v, %d service tokens; want alice's token exchanged once and kept, bob's again after the 401, one service token", es.exchanges, es.services)
	}
	for _, auth := range es.sawAuth {
		if strings.Contains(auth, "user-token-") {
			t.Errorf("a caller's own token reached the server: %q", auth)
		}
	}
	es.mu.Unlock()
	if as, sub := b.UpstreamOf(bob); as != UpstreamExchanged || sub != "bob" {
		t.Errorf("UpstreamOf(bob) = %q, %q; want exchanged, bob", as, sub)
	}
	if as, _ := b.UpstreamOf(&Caller{Identity: "token:abc"}); as != "" {
		t.Errorf("UpstreamOf(a caller without a token) = %q, want none: refused", as)
	}

	// A token due for renewal is exchanged again.
	e := b.tokens.x.entry(alice.Identity)
	e.mu.Lock()
	e.renew = time.Now().Add(-time.Second)
	e.mu.Unlock()
	if err := es.post(hc, alice); err != nil {
		t.Fatal(err)
	}
	es.mu.Lock()
	if n := es.exchanges["user-token-alice"]; n != 2 {
		t.Errorf("alice's token exchanged %d times, want again once due for renewal", n)
	}
	es.mu.Unlock()

	// A server that refuses the renewed token too gets no third one
	// within oauth_retry_interval.
	es.mu.Lock()
	es.never["dave"] = true
	es.mu.Unlock()
	dave := user("dave")
	for i := range 3 {
		if err := es.post(hc, dave); err == nil || (i > 0 && !strings.Contains(err.Error(), "refused (401)")) {
			t.Errorf("call %d of a caller whose tokens the server refuses: %v", i, err)
		}
	}
	es.mu.Lock()
	if n := es.exchanges["user-token-dave"]; n != 2 {
		t.Errorf("dave's token exchanged %d times, want twice: once, and once after the 401", n)
	}
	es.mu.Unlock()

	// A failed exchange says why, without the caller's token, even when
	// the server quotes it; it is not retried within
	// oauth_retry_interval, unless the caller comes with another token.
	es.mu.Lock()
	es.echo = true
	es.mu.Unlock()
	carol := &Caller{Identity: "oauth:corp:sub:carol", Subject: "carol", Token: NewSecret("not-a-user-token-carol")}
	err := es.post(hc, carol)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") || strings.Contains(err.Error(), "not-a-user-token") {
		t.Errorf("a refused exchange: %v; want the server's refusal without the token", err)
	}
	if c := Cause(err); !strings.Contains(c, "did not exchange the caller's access token") || strings.Contains(c, "invalid_grant") {
		t.Errorf("a client learns %q of a refused exchange; want that it failed, not the server's words", c)
	}
	if err := es.post(hc, carol); err == nil || !strings.Contains(err.Error(), "asks again in") {
		t.Errorf("a second call within oauth_retry_interval: %v; want the last failure", err)
	}
	carol.Token = NewSecret("user-token-carol")
	if err := es.post(hc, carol); err != nil {
		t.Errorf("a call with a new token after a failed exchange: %v", err)
	}
	if s := log.String(); strings.Contains(s, "user-token") || strings.Contains(s, "eyJ") || strings.Contains(s, "service-1") {
		t.Errorf("a token shows in the log:\n%s", s)
	}
	if !strings.Contains(log.String(), "upstream_subject=carol") {
		t.Errorf("the log does not say whom a token was exchanged for:\n%s", log.String())
	}
}

// TestTokenExchangeWithoutToken: a caller without an OAuth access token
// is refused, with an error that says why and what to do, unless the
// backend falls back to its own token; either way the metrics count it.
func TestTokenExchangeWithoutToken(t *testing.T) {
	staticToken := &Caller{Identity: "token:0123456789ab"}
	tests := []struct {
		fallback string
		wantErr  string // "" for a call that succeeds
		wantAs   string
	}{
		{config.ExchangeRefuse, `backend "up" acts upstream as each caller`, ""},
		{config.ExchangeService, "", UpstreamService},
	}
	for _, tt := range tests {
		t.Run(tt.fallback, func(t *testing.T) {
			es := newExchangeServer(t)
			b, hc, _ := es.backend(t, tt.fallback)
			err := b.countUpstream(staticToken)
			if err == nil {
				err = es.post(hc, staticToken)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("the call: %v", err)
			case tt.wantErr != "":
				var nt *NoOAuthTokenError
				if !errors.As(err, &nt) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "token:0123456789ab") ||
					!strings.Contains(err.Error(), `oauth_exchange_fallback = "service"`) {
					t.Errorf("the refusal: %v; want one naming the backend, the caller and the way out", err)
				}
				// The transport refuses too, should a call get there.
				if err := es.post(hc, staticToken); !errors.As(err, &nt) {
					t.Errorf("the transport sent a call without a token to exchange: %v", err)
				}
			}
			if as, _ := b.UpstreamOf(staticToken); as != tt.wantAs {
				t.Errorf("UpstreamOf = %q, want %q", as, tt.wantAs)
			}
			exchanged, service, refused, ok := b.UpstreamCalls()
			if !ok || exchanged != 0 || service+refused != 1 || (service == 1) != (tt.wantErr == "") {
				t.Errorf("UpstreamCalls = %d exchanged, %d service, %d refused, %v", exchanged, service, refused, ok)
			}
			es.mu.Lock()
			defer es.mu.Unlock()
			if len(es.exchanges) != 0 {
				t.Errorf("exchanged %v for a caller without a token", es.exchanges)
			}
		})
	}
}

// TestTokenExchangeOrigin: no token goes to an origin other than the
// backend's, whatever sends the request there.
func TestTokenExchangeOrigin(t *testing.T) {
	es := newExchangeServer(t)
	_, hc, _ := es.backend(t, config.ExchangeRefuse)
	var got []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Header.Get("Authorization")) }))
	t.Cleanup(other.Close)
	ctx := context.WithValue(context.Background(), CallerKey{}, user("alice"))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, other.URL+"/mcp", strings.NewReader("{}"))
	if _, err := hc.Do(req); err == nil || !strings.Contains(err.Error(), "sends tokens to "+es.srv.URL+" only") {
		t.Errorf("a request to another origin: %v", err)
	}
	if len(got) > 0 {
		t.Errorf("another origin got %q", got)
	}
}

// TestExchangeCacheBound: the cache keeps at most MaxExchangedTokens, and
// drops the one due for renewal first.
func TestExchangeCacheBound(t *testing.T) {
	x := newExchanger(&tokenSource{})
	now := time.Now()
	for i := range MaxExchangedTokens + 10 {
		e := x.entry("id-" + strconv.Itoa(i))
		e.renew = now.Add(time.Duration(i+1) * time.Minute)
	}
	if n := len(x.entries); n != MaxExchangedTokens {
		t.Errorf("%d entries, want %d", n, MaxExchangedTokens)
	}
	for i := range 10 {
		if x.entries["id-"+strconv.Itoa(i)] != nil {
			t.Errorf("entry %d, due first, was kept", i)
		}
	}
}

// TestSecretHidden: a caller's token prints as [redacted] however it is
// formatted or logged.
func TestSecretHidden(t *testing.T) {
	c := user("alice")
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "caller", c, "token", c.Token)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "token", c.Token)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q", c, *c, *c, c.Token, c.Token), buf.String()} {
		if strings.Contains(s, "user-token") {
			t.Errorf("the token shows: %s", s)
		}
	}
	if c.Token.Reveal() != "user-token-alice" {
		t.Errorf("Reveal = %q", c.Token.Reveal())
	}
}

// TestTokenExchangePassBack: an authorization server that answers the
// exchange with the caller's own token does not get the gateway to pass
// it through.
func TestTokenExchangePassBack(t *testing.T) {
	es := newExchangeServer(t)
	es.passBack = true
	_, hc, _ := es.backend(t, config.ExchangeRefuse)
	err := es.post(hc, user("alice"))
	if err == nil || !strings.Contains(err.Error(), "never passes it through") || strings.Contains(err.Error(), "user-token") {
		t.Errorf("an exchange answered with the caller's own token: %v", err)
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if len(es.sawAuth) > 0 {
		t.Errorf("the server got %q", es.sawAuth)
	}
}

// TestTokenExchangeForeignIssuer: with oauth_issuer, only tokens that
// server issued are exchanged; a caller's token of another issuer is
// refused before anything is sent anywhere.
func TestTokenExchangeForeignIssuer(t *testing.T) {
	es := newExchangeServer(t)
	b, hc, _ := es.backendOf(t, config.ExchangeService, "https://as.example")
	ours, foreign := user("alice"), user("bob")
	ours.Issuer, foreign.Issuer = "https://as.example", "https://other.example"
	if err := b.countUpstream(ours); err != nil {
		t.Errorf("a token of oauth_issuer: %v", err)
	}
	err := b.countUpstream(foreign)
	var fe *ForeignTokenError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "https://other.example") || !strings.Contains(err.Error(), "does not send to another authorization server") {
		t.Errorf("a token of another issuer: %v", err)
	}
	if err := es.post(hc, foreign); !errors.As(err, &fe) {
		t.Errorf("the transport: %v", err)
	}
	if as, _ := b.UpstreamOf(foreign); as != "" {
		t.Errorf("UpstreamOf(a caller of another issuer) = %q, want none: refused", as)
	}
	if _, _, refused, _ := b.UpstreamCalls(); refused != 1 {
		t.Errorf("%d calls counted refused, want 1", refused)
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if len(es.exchanges) != 0 || len(es.sawAuth) != 0 {
		t.Errorf("a foreign token was exchanged (%v) or reached the server (%q)", es.exchanges, es.sawAuth)
	}
}
