package itest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// gwKey is the private key of client "gwkey", which authenticates
	// with private_key_jwt.
	gwKey jose.JSONWebKey
}

// Test clients of the authorization server.
const (
	svcSecret   = "svc-secret-0123456789abcdef0123456789"
	otherSecret = "other-secret-0123456789abcdef012345678"
	// alice and bob are two users: their tokens' sub is their name.
	aliceSecret = "alice-secret-0123456789abcdef01234567"
	bobSecret   = "bob-secret-0123456789abcdef0123456789"
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
	gwKey := newKey(t, "gwkey")
	gwJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{gwKey.Public()}})
	clients := `[{"client_id":"svc","client_secret":"` + svcSecret + `","scope":"mcp:read mcp:write"},` +
		`{"client_id":"other","client_secret":"` + otherSecret + `","scope":"mcp:read"},` +
		`{"client_id":"gw","client_secret":"` + gwSecret + `","scope":"mcp:read"},` +
		`{"client_id":"gwkey","jwks":` + string(gwJWKS) + `,"scope":"mcp:read"},` +
		`{"client_id":"alice","client_secret":"` + aliceSecret + `","scope":"mcp:read"},` +
		`{"client_id":"bob","client_secret":"` + bobSecret + `","scope":"mcp:read"}]`
	cmd := exec.Command("node", filepath.Join(testutil.ModuleRoot(), "internal", "itest", "testdata", "oauth-as.mjs"))
	cmd.Env = append(os.Environ(), "OIDC_PROVIDER="+entry, "AS_PORT="+strconv.Itoa(port), "AS_JWKS="+string(jwks),
		"AS_CLIENTS="+clients, "AS_TTL="+strconv.Itoa(int(ttl/time.Second)))
	cmd.Env = append(cmd.Env, env...)
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	exit := testutil.StartExit(t, cmd)
	as := &authServer{Issuer: fmt.Sprintf("http://127.0.0.1:%d", port), port: port, keys: keys, pid: cmd.Process.Pid, exit: exit, gwKey: gwKey}
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

// TestOAuthAudienceIsTheListeners: without [oauth] resource, the
// resource is the listener's own URL, fixed at start: a token for
// another loopback URL is refused whatever Host the request names, and
// the metadata serves the listener's resource to every request. Before,
// the resource was built from the Host header, and a token for
// http://localhost:3000/mcp was let in with Host: localhost:3000.
func TestOAuthAudienceIsTheListeners(t *testing.T) {
	as := startAuthServer(t, 0, time.Hour, newKey(t, "k1"))
	d := oauthGateway(t, as, filepath.Join(t.TempDir(), "record"), "1h")
	u, _ := url.Parse(d.URL)
	mdURL := "http://" + u.Host + "/.well-known/oauth-protected-resource/mcp"
	send := func(method, target, host, token string) (int, string) {
		req, err := http.NewRequestWithContext(testutil.Context(t, 30*time.Second), method, target, strings.NewReader(initializeBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Forwarded-Host", "other-rs.example")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tokenFor := func(aud string) string {
		now := time.Now()
		return as.sign(t, as.keys[0], map[string]any{"iss": as.Issuer, "sub": "svc", "aud": aud, "scope": "mcp:read",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	}
	if code, body := send(http.MethodPost, d.URL, u.Host, tokenFor(d.URL)); code != http.StatusOK {
		t.Fatalf("a token for %s: %d %s", d.URL, code, body)
	}
	for _, host := range []string{"localhost:3000", "localhost:" + u.Port(), "[::1]:3000"} {
		aud := "http://" + host + "/mcp"
		if code, body := send(http.MethodPost, d.URL, host, tokenFor(aud)); code != http.StatusUnauthorized || !strings.Contains(body, "audience") {
			t.Errorf("Host %s, a token for %s: %d %s; want 401 for its audience", host, aud, code, body)
		}
		code, md := send(http.MethodGet, mdURL, host, "")
		if code != http.StatusOK || !strings.Contains(md, `"resource":"`+d.URL+`"`) {
			t.Errorf("Host %s: the metadata is %d %s; want resource %s", host, code, md, d.URL)
		}
	}
	if log := d.Stderr.String(); !strings.Contains(log, "access tokens must name the resource "+d.URL+" on "+u.Host) {
		t.Errorf("the start-up log does not say which resource is in force:\n%s", log)
	}
}
