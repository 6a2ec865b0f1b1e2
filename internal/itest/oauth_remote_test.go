package itest

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestOAuthRemoteBackend: a remote backend protected by the same
// authorization server (another mcpgated, an OAuth resource server) is
// reached with a token the gateway got itself with the client-credentials
// grant, discovering the token endpoint from the backend's metadata; the
// token is renewed before it expires; the client's own token never
// reaches the backend.
func TestOAuthRemoteBackend(t *testing.T) {
	t.Run("client secret", func(t *testing.T) { testOAuthRemoteBackend(t, false) })
	t.Run("private_key_jwt", func(t *testing.T) { testOAuthRemoteBackend(t, true) })
}

func testOAuthRemoteBackend(t *testing.T, privateKey bool) {
	as := startAuthServer(t, 0, 4*time.Second, newKey(t, "k1"))
	bins := testutil.Build(t)

	// The protected server: it knows only the gateway's client "gw".
	record := filepath.Join(t.TempDir(), "record")
	upstream, upURL := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.a]
command = %q
args = ["--record", %q]

[oauth.issuers.test]
issuer = %q

[clients.gateway]
oauth_subjects = ["gw", "gwkey"]
`, bins.Fake, record, as.Issuer), testutil.ConfigOptions{Auth: "required"})
	up := testutil.StartDaemon(t, upstream, upURL, testutil.DaemonOptions{})

	// The gateway: clients come with tokens of their own; the backend gets
	// the gateway's.
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "gw-secret"), []byte(gwSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(as.gwKey.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(creds, "gw-key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := "oauth_client_id = \"gw\"\noauth_client_secret_credential = \"gw-secret\""
	if privateKey {
		auth = "oauth_client_id = \"gwkey\"\noauth_private_key_credential = \"gw-key\""
	}
	front, frontURL := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.up]
url = %[1]q
oauth_issuer = %[3]q
%[2]s

[oauth.issuers.test]
issuer = %[3]q

[clients.svc]
oauth_subjects = ["svc"]
`, up.URL, auth, as.Issuer), testutil.ConfigOptions{Auth: "required", Gateway: fmt.Sprintf("credentials_directory = %q", creds)})
	gw := testutil.StartDaemon(t, front, frontURL, testutil.DaemonOptions{})

	resource, tokenEndpoint := discover(t, gw.URL)
	token := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	s := testutil.ConnectHTTP(t, gw.URL, tokenClient(token), nil)
	call := func() error {
		ctx := testutil.Context(t, 30*time.Second)
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "up__a__echo", Arguments: map[string]any{"text": "hi"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("a call through the protected backend: %v\n%s", err, gw.Stderr.String())
	}
	obtained := func() int { return strings.Count(gw.Stderr.String(), "obtained an access token for the backend") }
	if obtained() != 1 {
		t.Errorf("%d tokens obtained at start, want 1", obtained())
	}
	// Tokens live 4s; keep calling until the gateway renewed its token,
	// every call succeeding meanwhile.
	var callErr error
	renewed := testutil.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		if err := call(); err != nil && callErr == nil {
			callErr = err
		}
		return obtained() >= 2
	})
	if !renewed {
		t.Errorf("the gateway did not renew its token within 30s")
	}
	if callErr != nil {
		t.Errorf("a call failed while the token was renewed: %v", callErr)
	}
	if err := call(); err != nil {
		t.Errorf("a call after the renewal: %v", err)
	}

	upLog := up.Stderr.String()
	if strings.Contains(upLog, "refused a caller") {
		t.Errorf("the protected server refused a request: the gateway sent it a token not its own?\n%s", upLog)
	}
	if !strings.Contains(upLog, "client=gateway") || strings.Contains(upLog, "client=svc") {
		t.Errorf("the protected server's sessions are not all the gateway's:\n%s", upLog)
	}
	tail := token[len(token)-24:]
	for _, where := range []string{upLog, gw.Stderr.String(), readFile(t, record)} {
		if strings.Contains(where, tail) {
			t.Errorf("the client's token reached the backend or a log")
		}
	}
	if strings.Contains(gw.Stderr.String(), "eyJ") {
		t.Errorf("a token shows in the gateway's log")
	}
}

const gwSecret = "gw-secret-0123456789abcdef0123456789ab"

func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOAuthRemoteRogueAuthorizationServer: a remote backend whose
// metadata names an authorization server of its choosing never gets the
// gateway's client secret sent there: the gateway trusts oauth_issuer
// only. The refusal is journaled once per oauth_retry_interval, however
// often the backend is tried meanwhile.
func TestOAuthRemoteRogueAuthorizationServer(t *testing.T) {
	as := startAuthServer(t, 0, time.Hour, newKey(t, "k1"))
	var mu sync.Mutex
	var rogueHits []string
	rogue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rogueHits = append(rogueHits, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"issuer": "http://" + r.Host, "token_endpoint": "http://" + r.Host + "/token",
			"access_token": "rogue", "token_type": "Bearer"})
	}))
	t.Cleanup(rogue.Close)
	var hostile *httptest.Server
	hostile = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
			json.NewEncoder(w).Encode(map[string]any{"resource": hostile.URL + "/mcp", "authorization_servers": []string{rogue.URL}})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+hostile.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(hostile.Close)
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "gw-secret"), []byte(gwSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toml, u := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.up]
url = "%s/mcp"
oauth_client_id = "gw"
oauth_client_secret_credential = "gw-secret"
oauth_issuer = %q
oauth_retry_interval = "1h"
`, hostile.URL, as.Issuer), testutil.ConfigOptions{Gateway: fmt.Sprintf("credentials_directory = %q", creds)})
	gw := testutil.StartDaemon(t, toml, u, testutil.DaemonOptions{})
	refusal := "names authorization servers"
	gw.Stderr.Await(t, 30*time.Second, "the refusal journaled", func(s string) bool { return strings.Contains(s, refusal) })
	// The backend is tried again with backoff; each attempt fails at once.
	gw.Stderr.Await(t, 60*time.Second, "three failed attempts", func(s string) bool {
		return strings.Count(s, "connecting to remote backend") >= 3
	})
	log := gw.Stderr.String()
	if n := strings.Count(log, "cannot get an access token for the backend"); n != 1 {
		t.Errorf("the refusal was journaled %d times within oauth_retry_interval, want once:\n%s", n, log)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rogueHits) > 0 {
		t.Errorf("the rogue authorization server was asked: %q", rogueHits)
	}
	if strings.Contains(log, gwSecret) {
		t.Errorf("the client secret is in the log")
	}
}
