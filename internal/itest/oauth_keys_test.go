package itest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

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
