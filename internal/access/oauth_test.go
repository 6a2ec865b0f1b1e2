package access

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// testIssuer is an authorization server's metadata and JWKS, served over
// real HTTP, with keys the test rotates.
type testIssuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey // private keys; the JWKS serves their public halves
	fetches atomic.Int64      // JWKS fetches
}

func newTestIssuer(t testing.TB) *testIssuer {
	ti := &testIssuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": ti.srv.URL, "jwks_uri": ti.srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		ti.fetches.Add(1)
		ti.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range ti.keys {
			set.Keys = append(set.Keys, k.Public())
		}
		ti.mu.Unlock()
		json.NewEncoder(w).Encode(set)
	})
	ti.srv = httptest.NewServer(mux)
	t.Cleanup(ti.srv.Close)
	return ti
}

// addKey adds a new signing key of alg and returns it.
func (ti *testIssuer) addKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) jose.JSONWebKey {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	k := jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(alg), Use: "sig"}
	ti.mu.Lock()
	ti.keys = append(ti.keys, k)
	ti.mu.Unlock()
	return k
}

// sign makes a JWT of claims signed by key, with header fields extra.
func sign(t testing.TB, key jose.JSONWebKey, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", key.KeyID)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key.Key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const testResource = "http://127.0.0.1:7431/mcp"

func oauthConfig(t testing.TB, iss string, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `
[oauth]
resource = "` + testResource + `"
` + extra + `
[oauth.issuers.test]
issuer = "` + iss + `"
[clients.svc]
oauth_subjects = ["svc-1"]
tools = ["a__*"]
[clients.team]
oauth_groups = ["team"]
oauth_scopes = ["mcp:write"]
[clients.team-admin]
oauth_groups = ["team"]
oauth_scopes = ["mcp:write", "mcp:admin"]
`}))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func claims(iss string, over map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": iss, "sub": "svc-1", "aud": testResource, "exp": now.Add(time.Hour).Unix(),
		"iat": now.Unix(), "nbf": now.Unix(), "scope": "mcp:read"}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// TestOAuthTokens is the table of good and bad tokens: each bad one is
// refused with 401 invalid_token (or 400 invalid_request, 403), with a
// reason that never holds the token.
func TestOAuthTokens(t *testing.T) {
	ti := newTestIssuer(t)
	iss := ti.srv.URL
	rs := ti.addKey(t, "rs", jose.RS256)
	es := ti.addKey(t, "es", jose.ES256)
	ed := ti.addKey(t, "ed", jose.EdDSA)
	set, warnings := NewSet(oauthConfig(t, iss, `jwks_refresh_interval = "1h"`), Options{})
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	good := sign(t, rs, claims(iss, nil))
	other := newTestIssuer(t)
	stranger := other.addKey(t, "rs", jose.RS256)
	hour := time.Hour
	rsaPub, _ := x509.MarshalPKIXPublicKey(rs.Public().Key)

	tests := []struct {
		name      string
		token     string
		header    string // whole Authorization header, if not "Bearer "+token
		query     string
		status    int
		code      string // error= in WWW-Authenticate
		client    string
		reasonHas string
	}{
		{name: "RS256", token: good, client: "svc"},
		{name: "ES256", token: sign(t, es, claims(iss, nil)), client: "svc"},
		{name: "EdDSA", token: sign(t, ed, claims(iss, nil)), client: "svc"},
		{name: "audience in a list", token: sign(t, rs, claims(iss, map[string]any{"aud": []string{"other", testResource}})), client: "svc"},
		{name: "group and scope", token: sign(t, rs, claims(iss, map[string]any{"sub": "x", "groups": []string{"team"}, "scope": "mcp:read mcp:write"})), client: "team"},
		{name: "group and more scopes", token: sign(t, rs, claims(iss, map[string]any{"sub": "x", "groups": []string{"team"}, "scope": "mcp:admin mcp:write"})), client: "team-admin"},
		{name: "scopes as scp array", token: sign(t, rs, claims(iss, map[string]any{"sub": "x", "groups": []string{"team"}, "scope": nil, "scp": []string{"mcp:write"}})), client: "team"},
		{name: "expired", token: sign(t, rs, claims(iss, map[string]any{"exp": time.Now().Add(-hour).Unix(), "iat": time.Now().Add(-2 * hour).Unix()})), status: 401, code: "invalid_token", reasonHas: "expired"},
		{name: "expired within leeway", token: sign(t, rs, claims(iss, map[string]any{"exp": time.Now().Add(-10 * time.Second).Unix()})), client: "svc"},
		{name: "future nbf", token: sign(t, rs, claims(iss, map[string]any{"nbf": time.Now().Add(hour).Unix()})), status: 401, code: "invalid_token", reasonHas: "not valid before"},
		{name: "future iat", token: sign(t, rs, claims(iss, map[string]any{"iat": time.Now().Add(hour).Unix()})), status: 401, code: "invalid_token", reasonHas: "issued in the future"},
		{name: "no exp", token: sign(t, rs, claims(iss, map[string]any{"exp": nil})), status: 401, code: "invalid_token", reasonHas: "no exp"},
		{name: "other issuer", token: sign(t, stranger, claims(other.srv.URL, nil)), status: 401, code: "invalid_token", reasonHas: "not trusted"},
		{name: "issuer with trailing slash", token: sign(t, rs, claims(iss+"/", nil)), status: 401, code: "invalid_token", reasonHas: "not trusted"},
		{name: "other issuer's key, our iss", token: sign(t, stranger, claims(iss, map[string]any{})), status: 401, code: "invalid_token", reasonHas: "bad signature"},
		{name: "other audience", token: sign(t, rs, claims(iss, map[string]any{"aud": "https://other.example/mcp"})), status: 401, code: "invalid_token", reasonHas: "audience"},
		{name: "audience with trailing slash", token: sign(t, rs, claims(iss, map[string]any{"aud": testResource + "/"})), status: 401, code: "invalid_token", reasonHas: "audience"},
		{name: "audience without path", token: sign(t, rs, claims(iss, map[string]any{"aud": "http://127.0.0.1:7431"})), status: 401, code: "invalid_token", reasonHas: "audience"},
		{name: "no audience", token: sign(t, rs, claims(iss, map[string]any{"aud": nil})), status: 401, code: "invalid_token", reasonHas: "audience"},
		{name: "alg none", token: unsigned(claims(iss, nil)), status: 401, code: "invalid_token", reasonHas: "accepted algorithm"},
		{name: "HS256 with the public key", token: hs256(t, rsaPub, claims(iss, nil)), status: 401, code: "invalid_token", reasonHas: "accepted algorithm"},
		{name: "unknown kid", token: sign(t, jose.JSONWebKey{Key: stranger.Key, KeyID: "nope", Algorithm: "RS256"}, claims(iss, nil)), status: 401, code: "invalid_token", reasonHas: "no key"},
		{name: "tampered payload", token: tamper(good, claims(iss, map[string]any{"sub": "admin"})), status: 401, code: "invalid_token", reasonHas: "bad signature"},
		{name: "truncated signature", token: good[:len(good)-10], status: 401, code: "invalid_token"},
		{name: "oversized", token: good + strings.Repeat("A", MaxTokenBytes), status: 401, code: "invalid_token", reasonHas: "longer"},
		{name: "garbage", token: "not-a-token", status: 401, code: "invalid_token"},
		{name: "two dots of garbage", token: "a.b.c", status: 401, code: "invalid_token"},
		{name: "unknown subject", token: sign(t, rs, claims(iss, map[string]any{"sub": "nobody"})), status: 403, reasonHas: "matches no client"},
		{name: "missing scope", token: sign(t, rs, claims(iss, map[string]any{"sub": "x", "groups": []string{"team"}})), status: 403, code: "insufficient_scope", reasonHas: "lacks scope mcp:write"},
		{name: "token in query", query: "access_token=" + good, status: 400, code: "invalid_request"},
		{name: "token in query with header", token: good, query: "access_token=" + good, status: 400, code: "invalid_request"},
		{name: "basic auth", header: "Basic dXNlcjpwYXNz", status: 401, reasonHas: "not a bearer token"},
		{name: "no token", header: "-", status: 401, reasonHas: "no bearer token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://127.0.0.1:7431/mcp?"+tc.query, nil)
			switch {
			case tc.header == "-":
			case tc.header != "":
				r.Header.Set("Authorization", tc.header)
			case tc.token != "":
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			c, ref := set.Identify(r, Peer{Addr: "192.0.2.1:4242"})
			if tc.status == 0 {
				if ref != nil {
					t.Fatalf("refused: %s", ref.Reason)
				}
				if c.Client.Name != tc.client {
					t.Fatalf("client %q, want %q", c.Client.Name, tc.client)
				}
				if !strings.HasPrefix(c.Identity, "oauth:test:") || tc.client == "svc" && c.Identity != "oauth:test:sub:svc-1" {
					t.Fatalf("identity %q, want oauth:test: and the token's sub", c.Identity)
				}
				return
			}
			if ref == nil {
				t.Fatalf("let in as %q", c.Client.Name)
			}
			if ref.Status != tc.status {
				t.Errorf("status %d, want %d (%s)", ref.Status, tc.status, ref.Reason)
			}
			wantMD := `Bearer resource_metadata="http://127.0.0.1:7431/.well-known/oauth-protected-resource/mcp"`
			if tc.status != 403 || tc.code != "" {
				if !strings.HasPrefix(ref.Challenge, wantMD) {
					t.Errorf("challenge %q, want it to start with %q", ref.Challenge, wantMD)
				}
			}
			if tc.code != "" && !strings.Contains(ref.Challenge, `error="`+tc.code+`"`) {
				t.Errorf("challenge %q, want error=%q", ref.Challenge, tc.code)
			}
			if tc.code == "" && strings.Contains(ref.Challenge, "error=") {
				t.Errorf("challenge %q has an error code", ref.Challenge)
			}
			if !strings.Contains(ref.Reason, tc.reasonHas) {
				t.Errorf("reason %q, want it to say %q", ref.Reason, tc.reasonHas)
			}
			for _, s := range []string{ref.Reason, ref.Advice, ref.Challenge} {
				if tc.token != "" && len(tc.token) > 20 && strings.Contains(s, tc.token[len(tc.token)-20:]) {
					t.Errorf("the refusal holds the token: %q", s)
				}
			}
		})
	}
	if tc := "missing scope"; !strings.Contains(identify(t, set, sign(t, rs, claims(iss, map[string]any{"sub": "x", "groups": []string{"team"}}))).Challenge, `scope="mcp:write"`) {
		t.Errorf("%s: the challenge does not name the scope needed", tc)
	}
}

func identify(t *testing.T, set *Set, token string) *Refusal {
	r := httptest.NewRequest("POST", "http://127.0.0.1:7431/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	_, ref := set.Identify(r, Peer{Addr: "192.0.2.1:4242"})
	if ref == nil {
		t.Fatal("let in")
	}
	return ref
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func unsigned(c map[string]any) string {
	p, _ := json.Marshal(c)
	return b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(p) + "."
}

// hs256 signs c with HMAC-SHA256 keyed by the issuer's public key: the
// classic confusion attack.
func hs256(t *testing.T, key []byte, c map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "rs"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tamper replaces the payload of a signed token.
func tamper(tok string, c map[string]any) string {
	parts := strings.Split(tok, ".")
	p, _ := json.Marshal(c)
	return parts[0] + "." + b64(p) + "." + parts[2]
}

// TestOAuthKeyRotation checks that a key the issuer adds is picked up
// without a new resource server, and that a flood of tokens with unknown
// key ids fetches the JWKS at most once per interval.
func TestOAuthKeyRotation(t *testing.T) {
	ti := newTestIssuer(t)
	iss := ti.srv.URL
	old := ti.addKey(t, "k1", jose.RS256)
	set, _ := NewSet(oauthConfig(t, iss, `jwks_refresh_interval = "1h"`), Options{})
	ok := func(key jose.JSONWebKey) *Refusal {
		r := httptest.NewRequest("POST", testResource, nil)
		r.Header.Set("Authorization", "Bearer "+sign(t, key, claims(iss, map[string]any{"jti": rand.Text()})))
		_, ref := set.Identify(r, Peer{})
		return ref
	}
	if ref := ok(old); ref != nil {
		t.Fatal(ref.Reason)
	}
	if n := ti.fetches.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches after the first token, want 1", n)
	}
	// The issuer rotates: the new key validates at once (the first unknown
	// kid after an interval refetches; the test's interval is an hour, so
	// a fresh set is used).
	set2, _ := NewSet(oauthConfig(t, iss, `jwks_refresh_interval = "1ms"`), Options{})
	set = set2
	ok(old)
	fetched := ti.fetches.Load()
	nk := ti.addKey(t, "k2", jose.ES256)
	time.Sleep(2 * time.Millisecond) // past the 1ms refresh interval, not a synchronisation
	if ref := ok(nk); ref != nil {
		t.Fatalf("a token of the rotated-in key: %s", ref.Reason)
	}
	if ti.fetches.Load() != fetched+1 {
		t.Errorf("rotation fetched %d times, want once", ti.fetches.Load()-fetched)
	}

	// A flood of unknown kids within one interval: one fetch at most.
	set3, _ := NewSet(oauthConfig(t, iss, `jwks_refresh_interval = "1h"`), Options{})
	set = set3
	if ref := ok(nk); ref != nil {
		t.Fatal(ref.Reason)
	}
	before := ti.fetches.Load()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := jose.JSONWebKey{Key: nk.Key, KeyID: "forged-" + string(rune('a'+i%26)) + rand.Text(), Algorithm: "ES256"}
			if ok(k) == nil {
				t.Error("a token with an unknown kid was let in")
			}
		}()
	}
	wg.Wait()
	if n := ti.fetches.Load() - before; n > 1 {
		t.Errorf("200 tokens with unknown kids caused %d JWKS fetches within one interval, want at most 1", n)
	}
}

// TestListenerResources: the resource of each listener is decided from
// configuration and the listener alone: the configured one everywhere,
// else the loopback address or "localhost" for a unix socket; a listener
// that cannot name itself needs resource, and the error says so.
func TestListenerResources(t *testing.T) {
	load := func(resource string) *config.Config {
		oauth := "[oauth]\n"
		if resource != "" {
			oauth += "resource = \"" + resource + "\"\n"
		}
		cfg, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": oauth + "[oauth.issuers.test]\nissuer = \"https://as.example\"\n"}))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	loop4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7431}
	loop6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 7431}
	sock := &net.UnixAddr{Name: "/run/mcpgate/mcpgate.sock", Net: "unix"}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 8080}
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}

	got, err := ListenerResources(load(""), []net.Addr{loop4, loop6, sock})
	want := map[string]string{"127.0.0.1:7431": "http://127.0.0.1:7431/mcp", "[::1]:7431": "http://[::1]:7431/mcp",
		"/run/mcpgate/mcpgate.sock": "http://localhost/mcp"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("derived: %v, %v; want %v", got, err, want)
	}
	for _, a := range []net.Addr{public, any4} {
		_, err := ListenerResources(load(""), []net.Addr{loop4, a})
		if err == nil || !strings.Contains(err.Error(), a.String()) || !strings.Contains(err.Error(), "set resource") || !strings.Contains(err.Error(), "mcpgate.toml:1") {
			t.Errorf("listener %s without resource: %v, want an error naming it, the file and what to set", a, err)
		}
	}
	got, err = ListenerResources(load("https://mcp.example.com/mcp"), []net.Addr{public, sock})
	if err != nil || got[public.String()] != "https://mcp.example.com/mcp" || got[sock.String()] != "https://mcp.example.com/mcp" {
		t.Errorf("configured: %v, %v", got, err)
	}
	if got := MetadataURL("https://mcp.example.com/mcp"); got != "https://mcp.example.com/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("MetadataURL = %q", got)
	}
}

// TestOAuthAudienceIsNotTheClients: a token is checked against the
// resource of the listener it came to, whatever the request's Host and
// X-Forwarded-* say. Before, a loopback Host or a proxy's forwarded host
// chose the audience, and tokens for another resource were let in.
func TestOAuthAudienceIsNotTheClients(t *testing.T) {
	ti := newTestIssuer(t)
	rs := ti.addKey(t, "rs", jose.RS256)
	cfg, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `
[oauth]
[oauth.issuers.test]
issuer = "` + ti.srv.URL + `"
[clients.svc]
oauth_subjects = ["svc-1"]
`}))
	if err != nil {
		t.Fatal(err)
	}
	resources, err := ListenerResources(cfg, []net.Addr{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7431}})
	if err != nil {
		t.Fatal(err)
	}
	set, warnings := NewSet(cfg, Options{Resources: resources})
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	peer := Peer{Addr: "127.0.0.1:5000", Local: "127.0.0.1:7431"}
	identify := func(aud, host string, hdr map[string]string) *Refusal {
		r := httptest.NewRequest("POST", "http://"+host+"/mcp", nil)
		r.Host = host
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		r.Header.Set("Authorization", "Bearer "+sign(t, rs, claims(ti.srv.URL, map[string]any{"aud": aud})))
		_, ref := set.Identify(r, peer)
		return ref
	}
	if ref := identify("http://127.0.0.1:7431/mcp", "127.0.0.1:7431", nil); ref != nil {
		t.Fatalf("a token for this listener's resource: %s", ref.Reason)
	}
	forwarded := map[string]string{"X-Forwarded-Host": "other-rs.example", "X-Forwarded-Proto": "https"}
	appended := map[string]string{"X-Forwarded-Host": "other-rs.example, 127.0.0.1:7431", "X-Forwarded-Proto": "https, http"}
	for _, tc := range []struct {
		name, aud, host string
		hdr             map[string]string
	}{
		{"another port on a loopback Host", "http://localhost:3000/mcp", "localhost:3000", nil},
		{"another loopback name", "http://localhost:7431/mcp", "localhost:7431", nil},
		{"a forwarded host", "https://other-rs.example/mcp", "127.0.0.1:7431", forwarded},
		{"a forwarded host before the real one", "https://other-rs.example/mcp", "127.0.0.1:7431", appended},
		{"a Host naming the other resource", "https://other-rs.example/mcp", "other-rs.example", nil},
	} {
		ref := identify(tc.aud, tc.host, tc.hdr)
		if ref == nil || ref.Status != http.StatusUnauthorized || !strings.Contains(ref.Reason, "audience") {
			t.Errorf("%s: a token for %s got %+v, want 401 for its audience", tc.name, tc.aud, ref)
		}
		if ref != nil && !strings.Contains(ref.Challenge, `resource_metadata="http://127.0.0.1:7431/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("%s: challenge %q names another resource's metadata", tc.name, ref.Challenge)
		}
	}
	if got := set.OAuth().Resource(Peer{Local: "127.0.0.1:9999"}); got != "" {
		t.Errorf("a listener the gateway does not know has resource %q, want none", got)
	}
}

// TestOAuthReload checks that a reload that leaves [oauth] and the
// introspection secret alone keeps the resource server, with its keys and
// validated tokens, and that one changing either makes a new one.
func TestOAuthReload(t *testing.T) {
	ti := newTestIssuer(t)
	creds := t.TempDir()
	writeFile(t, creds, "secret", "one")
	load := func(leeway string) *config.Config {
		cfg, err := config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `
[oauth]
leeway = "` + leeway + `"
[oauth.issuers.jwt]
issuer = "` + ti.srv.URL + `"
[oauth.issuers.intro]
issuer = "https://auth.example.com"
introspection_endpoint = "https://auth.example.com/introspect"
client_id = "gw"
client_secret_credential = "secret"
`}))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	first, w := NewSet(load("30s"), Options{CredentialsDirectory: creds})
	if len(w) > 0 || first.OAuth() == nil {
		t.Fatalf("warnings %q", w)
	}
	same, _ := NewSet(load("30s"), Options{CredentialsDirectory: creds, Previous: first})
	if same.OAuth() != first.OAuth() {
		t.Errorf("an unchanged [oauth] made a new resource server")
	}
	changed, _ := NewSet(load("10s"), Options{CredentialsDirectory: creds, Previous: same})
	if changed.OAuth() == same.OAuth() {
		t.Errorf("a changed [oauth] kept the old resource server")
	}
	writeFile(t, creds, "secret", "two")
	rotated, _ := NewSet(load("10s"), Options{CredentialsDirectory: creds, Previous: changed})
	if rotated.OAuth() == changed.OAuth() {
		t.Errorf("a rotated introspection secret kept the old resource server")
	}
}

// TestOAuthIdentityIsTheSubject: two users whose groups map them to one
// client are one client and two identities; a token without a subject is
// an identity of its own.
func TestOAuthIdentityIsTheSubject(t *testing.T) {
	ti := newTestIssuer(t)
	rs := ti.addKey(t, "rs", jose.RS256)
	set, _ := NewSet(oauthConfig(t, ti.srv.URL, ""), Options{})
	identify := func(claims map[string]any) Caller {
		t.Helper()
		r := httptest.NewRequest("POST", testResource, nil)
		r.Header.Set("Authorization", "Bearer "+sign(t, rs, claims))
		c, ref := set.Identify(r, Peer{})
		if ref != nil {
			t.Fatalf("refused: %s", ref.Reason)
		}
		return c
	}
	n := 0
	team := func(sub any) map[string]any {
		n++ // RS256 is deterministic: tokens of equal claims are equal
		return claims(ti.srv.URL, map[string]any{"sub": sub, "groups": []string{"team"}, "scope": "mcp:write", "jti": strconv.Itoa(n)})
	}
	alice, bob := identify(team("alice")), identify(team("bob"))
	if alice.Client != bob.Client || alice.Identity != "oauth:test:sub:alice" || bob.Identity != "oauth:test:sub:bob" {
		t.Errorf("alice %q as %q, bob %q as %q; want one client, two identities", alice.Client.Name, alice.Identity, bob.Client.Name, bob.Identity)
	}
	anon1, anon2 := identify(team(nil)), identify(team(nil))
	if !strings.HasPrefix(anon1.Identity, "oauth:test:token:") || anon1.Identity == anon2.Identity {
		t.Errorf("tokens without sub: %q and %q; want each its own identity", anon1.Identity, anon2.Identity)
	}
}

// TestOAuthCallerKeepsItsToken: the Caller of an OAuth token keeps that
// very token (for a backend that exchanges it) and its subject, and
// shows the token neither in fmt nor in slog.
func TestOAuthCallerKeepsItsToken(t *testing.T) {
	ti := newTestIssuer(t)
	rs := ti.addKey(t, "rs", jose.RS256)
	set, _ := NewSet(oauthConfig(t, ti.srv.URL, ""), Options{})
	token := sign(t, rs, claims(ti.srv.URL, map[string]any{"sub": "alice", "groups": []string{"team"}, "scope": "mcp:write"}))
	r := httptest.NewRequest("POST", testResource, nil)
	r.Header.Set("Authorization", "Bearer "+token)
	c, ref := set.Identify(r, Peer{})
	if ref != nil {
		t.Fatalf("refused: %s", ref.Reason)
	}
	if c.AccessToken.Reveal() != token || c.Subject != "alice" || c.Issuer != ti.srv.URL {
		t.Errorf("the caller keeps token %v (equal: %v) and subject %q; want the validated token and alice", c.AccessToken, c.AccessToken.Reveal() == token, c.Subject)
	}
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "caller", c, "token", c.AccessToken)
	if s := fmt.Sprintf("%v %+v %#v %s", c, c, c, c.AccessToken) + buf.String(); strings.Contains(s, token[len(token)-20:]) {
		t.Errorf("the token shows: %s", s)
	}
}
