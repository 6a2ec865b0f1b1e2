package itest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

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
