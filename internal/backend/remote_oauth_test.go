package backend

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
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

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestTokenTransport checks the gateway's own token toward a remote
// server: discovered through the server's metadata, asked for with the
// resource and a private_key_jwt assertion the token endpoint verifies,
// reused, and renewed once after the server refused it, with the request
// body sent again.
func TestTokenTransport(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	creds := t.TempDir()
	os.WriteFile(filepath.Join(creds, "key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)

	var mu sync.Mutex
	issued := 0
	valid := map[string]bool{}
	var bodies []string
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{srv.URL + "/as"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server/as", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL + "/as", "token_endpoint": srv.URL + "/as/token"})
	})
	mux.HandleFunc("POST /as/token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		tok, err := jwt.ParseSigned(r.Form.Get("client_assertion"), []jose.SignatureAlgorithm{jose.ES256})
		var c jwt.Claims
		if err == nil {
			err = tok.Claims(&priv.PublicKey, &c)
		}
		if err != nil || c.Subject != "gw" || !c.Audience.Contains(srv.URL+"/as/token") || r.Form.Get("resource") != srv.URL+"/mcp" ||
			r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "mcp:tools" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		issued++
		token := "token-" + strconv.Itoa(issued)
		valid[token] = issued > 1 // the server refuses the first one
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(b))
		if !valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte("ok"))
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	cfg := &config.Backend{Name: "up", Remote: config.Remote{URL: srv.URL + "/mcp", RemoteOAuth: config.RemoteOAuth{
		OAuthClientID: "gw", OAuthPrivateKeyCredential: "key", OAuthScopes: []string{"mcp:tools"}, OAuthResource: srv.URL + "/mcp",
		OAuthIssuer: srv.URL + "/as"}}}
	b := New(cfg, Options{CredentialsDirectory: creds})
	hc, err := b.withToken(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		resp, err := hc.Post(srv.URL+"/mcp", "application/json", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if issued != 2 {
		t.Errorf("%d tokens issued, want 2: one refused by the server, one reused", issued)
	}
	if len(bodies) != 4 || bodies[1] != "body" {
		t.Errorf("the server got bodies %q, want the refused one sent again", bodies)
	}
	if b.TokenExpiry().IsZero() {
		t.Errorf("no token expiry in the status")
	}
	// The credential is read for every token request: a rotated one is
	// used from the next on (here, a broken one is noticed).
	os.WriteFile(filepath.Join(creds, "key"), []byte("not a key"), 0o600)
	if _, err := b.tokens.src.Refused(t.Context(), "token-2"); err == nil || !strings.Contains(err.Error(), "not a PEM private key") {
		t.Errorf("a new token request after the key changed: %v", err)
	}
}

// rogueServers is a remote MCP server with its own metadata, the
// authorization server the gateway trusts, and a rogue one; each records
// what reaches it.
type rogueServers struct {
	mcp, trusted, rogue *httptest.Server
	mu                  sync.Mutex
	tokenRequests       map[string]int    // by server: "trusted", "rogue"
	secrets             map[string]string // the Basic credentials each got
	prm                 map[string]any    // what the MCP server's metadata says
	asIssuer            string            // the issuer the trusted server's metadata names; default its URL
	tokenEndpoint       string            // the token endpoint it names; default its own
}

func newRogueServers(t *testing.T) *rogueServers {
	rs := &rogueServers{tokenRequests: map[string]int{}, secrets: map[string]string{}}
	as := func(name string, srv **httptest.Server) {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
			rs.mu.Lock()
			iss, ep := (*srv).URL, (*srv).URL+"/token"
			if name == "trusted" && rs.asIssuer != "" {
				iss = rs.asIssuer
			}
			if name == "trusted" && rs.tokenEndpoint != "" {
				ep = rs.tokenEndpoint
			}
			rs.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "token_endpoint": ep})
		})
		mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
			rs.mu.Lock()
			rs.tokenRequests[name]++
			rs.secrets[name] = r.Header.Get("Authorization")
			rs.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"access_token": name + "-token", "token_type": "Bearer", "expires_in": 3600})
		})
		*srv = httptest.NewServer(mux)
		t.Cleanup((*srv).Close)
	}
	as("trusted", &rs.trusted)
	as("rogue", &rs.rogue)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		json.NewEncoder(w).Encode(rs.prm)
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized) // every token, always
	})
	rs.mcp = httptest.NewServer(mux)
	t.Cleanup(rs.mcp.Close)
	rs.prm = map[string]any{"resource": rs.mcp.URL + "/mcp", "authorization_servers": []string{rs.trusted.URL}}
	return rs
}

func (rs *rogueServers) backend(t *testing.T, retry time.Duration) (*Backend, *http.Client, *testutil.Buffer) {
	creds := t.TempDir()
	os.WriteFile(filepath.Join(creds, "secret"), []byte("s3cret"), 0o600)
	cfg := &config.Backend{Name: "up", Remote: config.Remote{URL: rs.mcp.URL + "/mcp", RemoteOAuth: config.RemoteOAuth{
		OAuthClientID: "gw", OAuthClientSecretCredential: "secret", OAuthResource: rs.mcp.URL + "/mcp",
		OAuthIssuer: rs.trusted.URL, OAuthRetryInterval: retry}}}
	log := &testutil.Buffer{}
	b := New(cfg, Options{CredentialsDirectory: creds, Logger: slog.New(slog.NewTextHandler(log, nil))})
	hc, err := b.withToken(rs.mcp.Client())
	if err != nil {
		t.Fatal(err)
	}
	return b, hc, log
}

// TestTokenSourceTrustsOnlyTheConfiguredIssuer: the gateway's client
// secret goes to the token endpoint of oauth_issuer only. A server whose
// metadata names another authorization server, or is for another
// resource, or an issuer whose metadata names another issuer or a plain
// http token endpoint elsewhere, is refused with a message that says
// why, and no secret leaves.
func TestTokenSourceTrustsOnlyTheConfiguredIssuer(t *testing.T) {
	tests := []struct {
		name string
		set  func(rs *rogueServers)
		want string
	}{
		{"the server names a rogue authorization server", func(rs *rogueServers) {
			rs.prm["authorization_servers"] = []string{rs.rogue.URL}
		}, "not oauth_issuer"},
		{"the server lists the rogue first", func(rs *rogueServers) {
			rs.prm["authorization_servers"] = []string{rs.rogue.URL, rs.trusted.URL}
		}, ""},
		{"the metadata is for another resource", func(rs *rogueServers) {
			rs.prm["resource"] = "https://other.example/mcp"
		}, "is for resource"},
		{"the issuer's metadata names another issuer", func(rs *rogueServers) {
			rs.asIssuer = rs.rogue.URL
		}, "names issuer"},
		{"the token endpoint is plain http elsewhere", func(rs *rogueServers) {
			rs.tokenEndpoint = "http://192.0.2.1/token"
		}, "not https://"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRogueServers(t)
			tc.set(rs)
			_, hc, _ := rs.backend(t, time.Hour)
			_, err := hc.Post(rs.mcp.URL+"/mcp", "application/json", strings.NewReader("{}"))
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if tc.want == "" {
				// The configured issuer is among those listed: it gets the
				// token request, and nobody else does.
				if rs.tokenRequests["trusted"] != 1 || rs.tokenRequests["rogue"] != 0 {
					t.Errorf("token requests %v, want one to the trusted server", rs.tokenRequests)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if len(rs.tokenRequests) > 0 || len(rs.secrets) > 0 {
				t.Errorf("token requests %v carrying %v", rs.tokenRequests, rs.secrets)
			}
		})
	}
}

// TestTokenSourceBoundsRequestsAfterRefusals: a server that refuses every
// token costs one token request per oauth_retry_interval, not one per
// call, and the refusal is journaled once per interval.
func TestTokenSourceBoundsRequestsAfterRefusals(t *testing.T) {
	rs := newRogueServers(t)
	b, hc, log := rs.backend(t, time.Hour)
	for i := range 20 {
		resp, err := hc.Post(rs.mcp.URL+"/mcp", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("call %d went through: %s", i, resp.Status)
		}
		if !strings.Contains(err.Error(), "refused (401) the access token") {
			t.Fatalf("call %d: %v, want the refusal of a fresh token", i, err)
		}
	}
	check := func(requests, warnings int) {
		t.Helper()
		rs.mu.Lock()
		n := rs.tokenRequests["trusted"]
		rs.mu.Unlock()
		if w := strings.Count(log.String(), "cannot get an access token"); n != requests || w != warnings {
			t.Errorf("%d token requests and %d warnings, want %d and %d:\n%s", n, w, requests, warnings, log.String())
		}
	}
	check(1, 1)
	// Once the interval has passed, the next call asks again, once.
	src := b.tokens.src
	src.mu.Lock()
	src.failedAt = src.failedAt.Add(-2 * time.Hour)
	src.mu.Unlock()
	for range 5 {
		if _, err := hc.Post(rs.mcp.URL+"/mcp", "application/json", strings.NewReader("{}")); err == nil {
			t.Fatal("a call went through")
		}
	}
	check(2, 2)
	if strings.Contains(log.String(), "trusted-token") || strings.Contains(log.String(), "s3cret") {
		t.Errorf("a token or the secret is in the log:\n%s", log.String())
	}
}
