package itest

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestOAuthIntrospection: an issuer whose tokens are opaque is asked about
// each (RFC 7662) with the gateway's own client credentials from a
// credential; an active token for this resource is its client's, an
// unknown one is refused, and with token_cache_size = 0 a token revoked at
// the issuer is refused at once.
func TestOAuthIntrospection(t *testing.T) {
	as := startAuthServerEnv(t, []string{"AS_FORMAT=opaque"}, 0, time.Hour, newKey(t, "k1"))
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "gw-secret"), []byte(gwSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	bins := testutil.Build(t)
	toml, u := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.a]
command = %q

[oauth]
token_cache_size = 0

[oauth.issuers.test]
issuer = %q
introspection_endpoint = %q
client_id = "gw"
client_secret_credential = "gw-secret"
client_claim = "client_id"

[clients.svc]
oauth_subjects = ["svc"]
`, bins.Fake, as.Issuer, as.Issuer+"/token/introspection"), testutil.ConfigOptions{Auth: "required", Gateway: fmt.Sprintf("credentials_directory = %q", creds)})
	d := testutil.StartDaemon(t, toml, u, testutil.DaemonOptions{})
	resource, tokenEndpoint := discover(t, d.URL)
	token := as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read")
	if strings.Count(token, ".") == 2 {
		t.Fatalf("the authorization server issued a JWT, not an opaque token")
	}
	if resp, body := exchange(t, tokenClient(token), d.URL, initializeBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("an active opaque token: %s %s", resp.Status, body)
	}
	other := as.token(t, tokenEndpoint, "svc", svcSecret, "https://other.example/mcp", "mcp:read")
	for name, tok := range map[string]string{"unknown": "opaque-token-the-issuer-never-issued", "for another resource": other} {
		resp, body := exchange(t, tokenClient(tok), d.URL, initializeBody)
		if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(ch, `error="invalid_token"`) {
			t.Errorf("%s token: %s %q %s", name, resp.Status, ch, body)
		}
	}
	// Revoked at the issuer (RFC 7009): refused from the next request on.
	form := url.Values{"token": {token}}
	req, _ := http.NewRequest(http.MethodPost, as.Issuer+"/token/revocation", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("svc", svcSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revocation: %s", resp.Status)
	}
	if resp, body := exchange(t, tokenClient(token), d.URL, initializeBody); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked token: %s %s", resp.Status, body)
	}
	if strings.Contains(d.Stderr.String(), gwSecret) || strings.Contains(d.Stderr.String(), token) {
		t.Errorf("the gateway's secret or a token shows in its log")
	}
}
