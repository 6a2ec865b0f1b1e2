package scaleout

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

const (
	publicResource = "https://mcp.example/mcp" // the URL clients use, TLS ended before the balancer
	issuerURL      = "https://as.example"
	jwksAddr       = "127.0.0.1:9400" // in each host's namespace
)

// TestScaleOutOAuthAudience: behind HAProxy, as shipped, with [oauth]
// resource set to the public URL, no Host or X-Forwarded-* value a client
// sends makes a token for another resource acceptable, and the resource
// metadata is the same document whatever the request says. Before, the
// first X-Forwarded-Host of a trusted proxy's request, or any loopback
// Host, chose the audience.
func TestScaleOutOAuthAudience(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "network namespaces need root")
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key := jose.JSONWebKey{Key: priv, KeyID: "k1", Algorithm: "ES256", Use: "sig"}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	l := newLab(t, 2)
	oauth := fmt.Sprintf(`[oauth]
resource = %q

[oauth.issuers.as]
issuer = %q
jwks_uri = "http://%s/jwks"

[clients.svc]
oauth_subjects = ["svc"]
`, publicResource, issuerURL, jwksAddr)
	for i := range l.hosts {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(jwks)
		})}
		go srv.Serve(listenIn(t, l.hosts[i], jwksAddr))
		t.Cleanup(func() { srv.Close() })
		startHostWith(t, l, i, "required", oauth)
	}
	startHAProxy(t, l)
	hc := &http.Client{Transport: &http.Transport{DialContext: dialIn(t, l.lb)}, Timeout: wait}
	t.Cleanup(hc.CloseIdleConnections)
	token := func(aud string) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key.Key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", key.KeyID))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		tok, err := jwt.Signed(s).Claims(jwt.Claims{Issuer: issuerURL, Subject: "svc", Audience: jwt.Audience{aud},
			Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	do := func(method, url, host, tok string, hdr map[string]string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"scaleout","version":"1"}}}`
		if method == http.MethodGet {
			body = ""
		}
		req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if host != "" {
			req.Host = host
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	lb := "http://" + lbAddr + ":" + port
	hostile := []map[string]string{
		nil,
		{"X-Forwarded-Host": "other-rs.example", "X-Forwarded-Proto": "https"},
		{"X-Forwarded-Host": "other-rs.example, " + lbAddr + ":" + port, "X-Forwarded-Proto": "https, http"},
		{"Forwarded": "host=other-rs.example;proto=https"},
		{"X-Forwarded-Host": "localhost:3000", "X-Forwarded-Proto": "http"},
	}
	good, other, local := token(publicResource), token("https://other-rs.example/mcp"), token("http://localhost:3000/mcp")
	var metadata string
	// Twice each, so that round-robin takes each case to both hosts.
	for round := range 2 {
		for _, hdr := range hostile {
			if code, body := do(http.MethodPost, lb+"/mcp", "", good, hdr); code != http.StatusOK {
				t.Errorf("round %d, headers %v: a token for %s got %d %s, want 200", round, hdr, publicResource, code, body)
			}
			if code, body := do(http.MethodPost, lb+"/mcp", "", other, hdr); code != http.StatusUnauthorized || !strings.Contains(body, "audience") {
				t.Errorf("round %d, headers %v: a token for another resource got %d %s, want 401 for its audience", round, hdr, code, body)
			}
			if code, body := do(http.MethodPost, lb+"/mcp", "localhost:3000", local, hdr); code != http.StatusUnauthorized {
				t.Errorf("round %d, headers %v: a token for http://localhost:3000/mcp with that Host got %d %s, want 401", round, hdr, code, body)
			}
			code, md := do(http.MethodGet, lb+"/.well-known/oauth-protected-resource/mcp", "", "", hdr)
			if code != http.StatusOK || !strings.Contains(md, `"resource":"`+publicResource+`"`) {
				t.Errorf("round %d, headers %v: metadata %d %s, want resource %s", round, hdr, code, md, publicResource)
			}
			if metadata == "" {
				metadata = md
			} else if md != metadata {
				t.Errorf("round %d, headers %v: the metadata changed:\n%s\nwas\n%s", round, hdr, md, metadata)
			}
		}
	}
	// Straight to a host, past the balancer: the same.
	for i := range l.hosts {
		direct := "http://" + hostAddr(i) + ":" + port + "/mcp"
		if code, body := do(http.MethodPost, direct, "", other, hostile[1]); code != http.StatusUnauthorized {
			t.Errorf("host h%d directly: a token for another resource got %d %s, want 401", i+1, code, body)
		}
	}
}
