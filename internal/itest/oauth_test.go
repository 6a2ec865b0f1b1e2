package itest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// authServer is a real OAuth authorization server, panva's oidc-provider
// from npm (installed by packaging/ci/deps.sh), run by
// testdata/oauth-as.mjs.
type authServer struct {
	Issuer string
	port   int
	keys   []jose.JSONWebKey // private; the first signs
	pid    int
	exit   <-chan error
}

// Test clients of the authorization server.
const (
	svcSecret   = "svc-secret-0123456789abcdef0123456789"
	otherSecret = "other-secret-0123456789abcdef012345678"
)

func newKey(t *testing.T, kid string) jose.JSONWebKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: "ES256", Use: "sig"}
}

// startAuthServer starts the authorization server on port (0: a free one)
// with keys, the first of which signs, tokens living ttl.
func startAuthServer(t *testing.T, port int, ttl time.Duration, keys ...jose.JSONWebKey) *authServer {
	t.Helper()
	return startAuthServerEnv(t, nil, port, ttl, keys...)
}

// startAuthServerEnv is startAuthServer with more of oauth-as.mjs's
// environment, such as AS_FORMAT=opaque.
func startAuthServerEnv(t *testing.T, env []string, port int, ttl time.Duration, keys ...jose.JSONWebKey) *authServer {
	t.Helper()
	entry := filepath.Join(testutil.CacheDir(), "npm", "node_modules", "oidc-provider", "lib", "index.js")
	if _, err := os.Stat(entry); err != nil {
		testutil.Unavailable(t, "oidc-provider is not installed (run packaging/ci/deps.sh, which make check runs): %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed: %v", err)
	}
	if port == 0 {
		port = testutil.FreePort(t)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	clients := `[{"client_id":"svc","client_secret":"` + svcSecret + `","scope":"mcp:read mcp:write"},` +
		`{"client_id":"other","client_secret":"` + otherSecret + `","scope":"mcp:read"},` +
		`{"client_id":"gw","client_secret":"` + gwSecret + `","scope":"mcp:read"}]`
	cmd := exec.Command("node", filepath.Join(testutil.ModuleRoot(), "internal", "itest", "testdata", "oauth-as.mjs"))
	cmd.Env = append(os.Environ(), "OIDC_PROVIDER="+entry, "AS_PORT="+strconv.Itoa(port), "AS_JWKS="+string(jwks),
		"AS_CLIENTS="+clients, "AS_TTL="+strconv.Itoa(int(ttl/time.Second)))
	cmd.Env = append(cmd.Env, env...)
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	exit := testutil.StartExit(t, cmd)
	as := &authServer{Issuer: fmt.Sprintf("http://127.0.0.1:%d", port), port: port, keys: keys, pid: cmd.Process.Pid, exit: exit}
	out.Await(t, 30*time.Second, "the authorization server to listen", func(s string) bool { return strings.Contains(s, "listening "+as.Issuer) })
	return as
}

// stop ends the authorization server and waits for it.
func (as *authServer) stop(t *testing.T) {
	testutil.KillTree(as.pid)
	select {
	case <-as.exit:
	case <-time.After(10 * time.Second):
		t.Fatalf("the authorization server (pid %d) did not exit", as.pid)
	}
}

// token gets an access token for resource with the client-credentials
// grant, as a service would.
func (as *authServer) token(t *testing.T, tokenEndpoint, client, secret, resource, scope string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope}}
	req, _ := http.NewRequest(http.MethodPost, tokenEndpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error_description"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusOK || body.AccessToken == "" {
		t.Fatalf("token endpoint: %s: %s", resp.Status, body.Error)
	}
	return body.AccessToken
}

// sign makes a token as the authorization server would, with key, so that
// bad tokens differ from good ones only in what the case names.
func (as *authServer) sign(t *testing.T, key jose.JSONWebKey, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key.Key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", key.KeyID))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// oauthGateway runs mcpgated with OAuth on, trusting as, with backends a
// and b (fake servers recording what reaches them in record) and client
// svc, which may use a's tools only.
func oauthGateway(t *testing.T, as *authServer, record, refresh string) *testutil.Daemon {
	t.Helper()
	bins := testutil.Build(t)
	backends := fmt.Sprintf(`
[backends.a]
command = %[1]q
args = ["--record", %[2]q]

[backends.b]
command = %[1]q
args = ["--record", %[2]q]

[oauth]
scopes_supported = ["mcp:read", "mcp:write"]
jwks_refresh_interval = %[4]q

[oauth.issuers.test]
issuer = %[3]q

[clients.svc]
oauth_subjects = ["svc"]
oauth_scopes = ["mcp:read"]
tools = ["a__*"]

# Static tokens work beside OAuth.
[clients.static]
token_sha256 = %[5]q
`, bins.Fake, record, as.Issuer, refresh, sha256Hex(fullToken))
	toml, u := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	return testutil.StartDaemon(t, toml, u, testutil.DaemonOptions{})
}

// discover does what an MCP client does on a 401: reads the resource
// metadata the challenge names, then the authorization server's metadata,
// and returns the resource and the token endpoint.
func discover(t *testing.T, gw string) (resource, tokenEndpoint string) {
	t.Helper()
	resp, _ := exchange(t, http.DefaultClient, gw, initializeBody)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %s, want 401", resp.Status)
	}
	ch := resp.Header.Get("WWW-Authenticate")
	_, mdURL, ok := strings.Cut(ch, `resource_metadata="`)
	mdURL, _, _ = strings.Cut(mdURL, `"`)
	if !ok || !strings.HasPrefix(ch, "Bearer ") {
		t.Fatalf("WWW-Authenticate %q has no resource_metadata", ch)
	}
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		Bearer               []string `json:"bearer_methods_supported"`
	}
	getJSON(t, mdURL, &md)
	if md.Resource != gw || len(md.AuthorizationServers) != 1 || len(md.Bearer) != 1 || md.Bearer[0] != "header" {
		t.Fatalf("resource metadata %+v, want resource %s, one server, header only", md, gw)
	}
	var as struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	getJSON(t, md.AuthorizationServers[0]+"/.well-known/oauth-authorization-server", &as)
	if as.Issuer != md.AuthorizationServers[0] || as.TokenEndpoint == "" {
		t.Fatalf("authorization server metadata %+v", as)
	}
	return md.Resource, as.TokenEndpoint
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// recorded returns the lines the backends received so far, but the
// gateway's own health checks.
func recorded(t *testing.T, record string) []string {
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(l, `"method":"ping"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestOAuthClientCredentials: a service gets a token from a real
// authorization server with the client-credentials grant after
// discovering it from the gateway's 401, and uses the tools its client's
// policy allows, and only those.
func TestOAuthClientCredentials(t *testing.T) {
	as := startAuthServer(t, 0, time.Hour, newKey(t, "k1"))
	record := filepath.Join(t.TempDir(), "record")
	d := oauthGateway(t, as, record, "1h")
	resource, tokenEndpoint := discover(t, d.URL)
	token := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")

	s := testutil.ConnectHTTP(t, d.URL, tokenClient(token), nil)
	ctx := testutil.Context(t, 30*time.Second)
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if !strings.HasPrefix(tool.Name, "a__") {
			t.Errorf("svc sees %s, outside its policy", tool.Name)
		}
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("a__echo: %v %+v", err, res)
	}
	before := len(recorded(t, record))
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "b__echo", Arguments: map[string]any{"text": "hi"}}); err == nil && !res.IsError {
		t.Errorf("b__echo, outside svc's policy, was called: %+v", res)
	}
	if n := len(recorded(t, record)); n != before {
		t.Errorf("the refused call reached a backend: %q", recorded(t, record)[before:])
	}
	// The client's token never reaches a backend.
	for _, line := range recorded(t, record) {
		if strings.Contains(line, token[len(token)-30:]) {
			t.Errorf("a backend received the client's token: %s", line)
		}
	}

	// A client of the server whose subject no [clients.NAME] lists: 403.
	otherTok := as.token(t, tokenEndpoint, "other", otherSecret, resource, "mcp:read")
	if resp, _ := exchange(t, tokenClient(otherTok), d.URL, initializeBody); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a valid token of an unknown subject: %s, want 403", resp.Status)
	}
	// svc with a token without the scope its client needs: 403 naming it.
	noScope := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:write")
	resp, _ := exchange(t, tokenClient(noScope), d.URL, initializeBody)
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="mcp:read"`) {
		t.Errorf("a token without mcp:read: %s %q, want 403 insufficient_scope naming mcp:read", resp.Status, ch)
	}
}

// TestOAuthBadTokens is the table of bad tokens, through the real daemon:
// each gets the status and WWW-Authenticate of RFC 6750 and RFC 9728, and
// none reaches a backend.
func TestOAuthBadTokens(t *testing.T) {
	key := newKey(t, "k1")
	as := startAuthServer(t, 0, time.Hour, key)
	record := filepath.Join(t.TempDir(), "record")
	d := oauthGateway(t, as, record, "1h")
	resource, tokenEndpoint := discover(t, d.URL)
	good := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	md := `Bearer resource_metadata="` + strings.Replace(resource, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1) + `"`

	now := time.Now()
	claims := func(over map[string]any) map[string]any {
		c := map[string]any{"iss": as.Issuer, "sub": "svc", "client_id": "svc", "aud": resource, "scope": "mcp:read",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": rand.Text()}
		for k, v := range over {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	signed := func(over map[string]any) string { return as.sign(t, key, claims(over)) }
	stranger := newKey(t, "k1") // same kid, another key
	hmacKey, _ := json.Marshal(key.Public())
	parts := strings.Split(good, ".")
	payload, _ := json.Marshal(claims(map[string]any{"sub": "admin"}))

	tests := []struct {
		name   string
		header string // the Authorization header; "" sends none
		query  string
		status int
		code   string
	}{
		{"no token", "", "", 401, ""},
		{"expired", "Bearer " + signed(map[string]any{"exp": now.Add(-time.Hour).Unix(), "iat": now.Add(-2 * time.Hour).Unix()}), "", 401, "invalid_token"},
		{"future nbf", "Bearer " + signed(map[string]any{"nbf": now.Add(time.Hour).Unix()}), "", 401, "invalid_token"},
		{"future iat", "Bearer " + signed(map[string]any{"iat": now.Add(time.Hour).Unix()}), "", 401, "invalid_token"},
		{"no exp", "Bearer " + signed(map[string]any{"exp": nil}), "", 401, "invalid_token"},
		{"other issuer", "Bearer " + signed(map[string]any{"iss": "https://evil.example"}), "", 401, "invalid_token"},
		{"issuer with trailing slash", "Bearer " + signed(map[string]any{"iss": as.Issuer + "/"}), "", 401, "invalid_token"},
		{"other audience", "Bearer " + signed(map[string]any{"aud": "https://other.example/mcp"}), "", 401, "invalid_token"},
		{"audience with trailing slash", "Bearer " + signed(map[string]any{"aud": resource + "/"}), "", 401, "invalid_token"},
		{"audience without the path", "Bearer " + signed(map[string]any{"aud": strings.TrimSuffix(resource, "/mcp")}), "", 401, "invalid_token"},
		{"no audience", "Bearer " + signed(map[string]any{"aud": nil}), "", 401, "invalid_token"},
		{"alg none", "Bearer " + b64(`{"alg":"none","typ":"at+jwt"}`) + "." + b64(string(mustJSON(claims(nil)))) + ".", "", 401, "invalid_token"},
		{"HS256 signed with the public key", "Bearer " + hmacSigned(t, hmacKey, claims(nil)), "", 401, "invalid_token"},
		{"unknown kid", "Bearer " + as.sign(t, jose.JSONWebKey{Key: stranger.Key, KeyID: "k9", Algorithm: "ES256"}, claims(nil)), "", 401, "invalid_token"},
		{"another key with the known kid", "Bearer " + as.sign(t, stranger, claims(nil)), "", 401, "invalid_token"},
		{"tampered payload", "Bearer " + parts[0] + "." + b64(string(payload)) + "." + parts[2], "", 401, "invalid_token"},
		{"signature cut", "Bearer " + good[:len(good)-8], "", 401, "invalid_token"},
		{"oversized", "Bearer " + good + strings.Repeat("x", 9000), "", 401, "invalid_token"},
		{"garbage", "Bearer not.a.token", "", 401, "invalid_token"},
		{"binary garbage", "Bearer " + b64("\x00\x01\x02"), "", 401, "invalid_token"},
		{"token in the query string", "", "access_token=" + good, 400, "invalid_request"},
		{"token in the query string and header", "Bearer " + good, "access_token=" + good, 400, "invalid_request"},
		{"basic scheme", "Basic " + b64("svc:"+svcSecret), "", 401, ""},
		{"empty bearer", "Bearer ", "", 401, ""},
	}
	before := recorded(t, record)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := d.URL
			if tc.query != "" {
				u += "?" + tc.query
			}
			var headers []string
			if tc.header != "" {
				headers = []string{"Authorization", tc.header}
			}
			resp, body := exchange(t, http.DefaultClient, u, initializeBody, headers...)
			if resp.StatusCode != tc.status {
				t.Errorf("status %s, want %d: %s", resp.Status, tc.status, body)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, md) {
				t.Errorf("WWW-Authenticate %q, want it to start with %q", ch, md)
			}
			if tc.code != "" && !strings.Contains(ch, `error="`+tc.code+`"`) {
				t.Errorf("WWW-Authenticate %q, want error=%q", ch, tc.code)
			}
			if tc.code == "" && strings.Contains(ch, "error=") {
				t.Errorf("WWW-Authenticate %q: a request without a token gets no error code (RFC 6750 section 3.1)", ch)
			}
			if tok := strings.TrimPrefix(tc.header, "Bearer "); len(tok) > 40 && (strings.Contains(body, tok[len(tok)-20:]) || strings.Contains(d.Stderr.String(), tok[len(tok)-20:])) {
				t.Errorf("the token shows in the answer or the daemon's log")
			}
		})
	}
	if after := recorded(t, record); len(after) != len(before) {
		t.Errorf("bad tokens reached a backend: %q", after[len(before):])
	}
	// The good token still works: the table did not lock anyone out.
	if resp, body := exchange(t, tokenClient(good), d.URL, initializeBody); resp.StatusCode != http.StatusOK {
		t.Errorf("the good token after the table: %s %s", resp.Status, body)
	}
}

// TestOAuthKeyRotation: the authorization server is redeployed with a new
// signing key during a run; its tokens validate without restarting
// mcpgated, and the old key's tokens still do while it is published.
func TestOAuthKeyRotation(t *testing.T) {
	k1, k2 := newKey(t, "k1"), newKey(t, "k2")
	as := startAuthServer(t, 0, time.Hour, k1)
	record := filepath.Join(t.TempDir(), "record")
	d := oauthGateway(t, as, record, "1s")
	resource, tokenEndpoint := discover(t, d.URL)
	old := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	if resp, body := exchange(t, tokenClient(old), d.URL, initializeBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("k1's token: %s %s", resp.Status, body)
	}
	as.stop(t)
	as = startAuthServer(t, as.port, time.Hour, k2, k1)
	fresh := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	if !strings.Contains(string(mustB64Decode(t, strings.Split(fresh, ".")[0])), `"kid":"k2"`) {
		t.Fatalf("the rotated server did not sign with k2")
	}
	// An unknown kid refetches the keys once jwks_refresh_interval (1s)
	// passed since the last fetch: the token is accepted from then on.
	testutil.Eventually(t, 30*time.Second, "k2's token to be accepted after the rotation", func() bool {
		resp, _ := exchange(t, tokenClient(fresh), d.URL, initializeBody)
		return resp.StatusCode == http.StatusOK
	})
	if resp, body := exchange(t, tokenClient(old), d.URL, initializeBody); resp.StatusCode != http.StatusOK {
		t.Errorf("k1's token after the rotation: %s %s", resp.Status, body)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func mustB64Decode(t *testing.T, s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// hmacSigned signs claims with HS256 keyed by the issuer's public key: the
// classic algorithm confusion attack.
func hmacSigned(t *testing.T, key []byte, claims map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOAuthTypeScriptSDK: the TypeScript MCP SDK's OAuth client support
// (ClientCredentialsProvider) completes its discovery against mcpgate's
// 401 and metadata, gets its token from the authorization server itself
// and lists the tools its client may see.
func TestOAuthTypeScriptSDK(t *testing.T) {
	as := startAuthServer(t, 0, time.Hour, newKey(t, "k1"))
	d := oauthGateway(t, as, filepath.Join(t.TempDir(), "record"), "1h")
	sdk := filepath.Join(testutil.CacheDir(), "npm", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm")
	if _, err := os.Stat(sdk); err != nil {
		testutil.Unavailable(t, "@modelcontextprotocol/sdk is not installed (packaging/ci/deps.sh): %v", err)
	}
	cmd := exec.Command("node", filepath.Join(testutil.ModuleRoot(), "internal", "itest", "testdata", "oauth-sdk-client.mjs"))
	cmd.Env = append(os.Environ(), "SDK="+sdk, "MCP_URL="+d.URL, "CLIENT_ID=svc", "CLIENT_SECRET="+svcSecret, "ISSUER="+as.Issuer, "SCOPE=mcp:read")
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	exit := testutil.StartExit(t, cmd)
	select {
	case err := <-exit:
		if err != nil {
			t.Fatalf("the SDK client failed: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the SDK client did not finish:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[len(lines)-1] != "ok" || !strings.Contains(out.String(), "a__echo") || strings.Contains(out.String(), "b__echo") {
		t.Errorf("the SDK client's output, want a's tools only, then ok:\n%s", out.String())
	}
}

// TestOAuthSessionRevalidated: a 2025 session belongs to the identity of
// the token that initialized it, and every later request is validated
// again: without a token, with an expired one or as another client, the
// session is out of reach.
func TestOAuthSessionRevalidated(t *testing.T) {
	key := newKey(t, "k1")
	as := startAuthServer(t, 0, time.Hour, key)
	d := oauthGateway(t, as, filepath.Join(t.TempDir(), "record"), "1h")
	resource, tokenEndpoint := discover(t, d.URL)
	token := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	resp, body := exchange(t, tokenClient(token), d.URL, initializeBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	expired := as.sign(t, key, map[string]any{"iss": as.Issuer, "sub": "svc", "aud": resource, "scope": "mcp:read",
		"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()})
	tests := []struct {
		name   string
		hc     *http.Client
		status int
	}{
		{"the same token", tokenClient(token), http.StatusOK},
		{"no token", http.DefaultClient, http.StatusUnauthorized},
		{"an expired token of the same subject", tokenClient(expired), http.StatusUnauthorized},
		{"another client's static token", tokenClient(fullToken), http.StatusNotFound},
		{"a new token of the same subject", tokenClient(as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")), http.StatusOK},
	}
	for _, tc := range tests {
		resp, body := exchange(t, tc.hc, d.URL, list, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18")
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s, want %d: %s", tc.name, resp.Status, tc.status, body)
		}
	}
}

// TestOAuthUnknownKidFlood: tokens naming keys the issuer never had, many
// at once, cost the authorization server at most one JWKS fetch per
// jwks_refresh_interval. The gateway reads the real server's JWKS through
// a proxy that counts.
func TestOAuthUnknownKidFlood(t *testing.T) {
	key := newKey(t, "k1")
	as := startAuthServer(t, 0, time.Hour, key)
	var fetches atomic.Int64
	target, _ := url.Parse(as.Issuer)
	rp := httputil.NewSingleHostReverseProxy(target)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)

	bins := testutil.Build(t)
	toml, u := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.a]
command = %q

[oauth]
jwks_refresh_interval = "1h"

[oauth.issuers.test]
issuer = %q
jwks_uri = %q

[clients.svc]
oauth_subjects = ["svc"]
`, bins.Fake, as.Issuer, counting.URL+"/jwks"), testutil.ConfigOptions{Auth: "required"})
	d := testutil.StartDaemon(t, toml, u, testutil.DaemonOptions{})
	resource, tokenEndpoint := discover(t, d.URL)
	good := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	if resp, body := exchange(t, tokenClient(good), d.URL, initializeBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("a good token: %s %s", resp.Status, body)
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches for the first token, want 1", n)
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			forged := as.sign(t, jose.JSONWebKey{Key: key.Key, KeyID: fmt.Sprintf("forged-%d", i), Algorithm: "ES256"},
				map[string]any{"iss": as.Issuer, "sub": "svc", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
			req, _ := http.NewRequest(http.MethodPost, d.URL, strings.NewReader(initializeBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+forged)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a token with an unknown kid: %s", resp.Status)
			}
		}()
	}
	wg.Wait()
	if n := fetches.Load(); n > 2 {
		t.Errorf("100 tokens with unknown kids made %d JWKS fetches within one interval, want at most 1 beyond the first", n-1)
	}
}
