package backend

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgate/mcpgate/internal/config"
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
		OAuthClientID: "gw", OAuthPrivateKeyCredential: "key", OAuthScopes: []string{"mcp:tools"}, OAuthResource: srv.URL + "/mcp"}}}
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
