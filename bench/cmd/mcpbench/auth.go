package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgate/mcpgate/bench/internal/gateways"
)

// staticToken is the bench client's token for mcpgate-token.
const staticToken = "mcpbench-static-token-0123456789abcdef"

// authScenario measures what knowing who calls costs: mcpgate without
// authentication, with a static bearer token, and as an OAuth resource
// server validating a JWT access token (ES256, keys from a JWKS the bench
// serves) on every request.
func (b *bencher) authScenario() error {
	issuer, token, stopIssuer, err := benchIssuer()
	if err != nil {
		return err
	}
	defer stopIssuer()
	sum := sha256.Sum256([]byte(staticToken))
	static := gateways.Authenticated("mcpgate-token", fmt.Sprintf("[clients.bench]\ntoken_sha256 = %q\n", hex.EncodeToString(sum[:])), staticToken)
	oauth := gateways.Authenticated("mcpgate-oauth", fmt.Sprintf(`[oauth.issuers.bench]
issuer = %q
audiences = ["mcpbench"]

[clients.bench]
oauth_subjects = ["bench"]
`, issuer), token)
	return b.compare("auth", []*gateways.Gateway{gateways.All()[1], static, oauth}, 1, b.plan.payloadSessions)
}

// compare starts each of compared on benchecho, runs the scenario's
// loads (1 KiB payloads) at each count of sessions over all of them in
// the same rounds, and stops them.
func (b *bencher) compare(scenario string, compared []*gateways.Gateway, sessions ...int) error {
	running, stop, err := b.startEach(compared, b.echo())
	if err != nil {
		return err
	}
	defer stop()
	for _, n := range sessions {
		b.loadRuns(scenario, "benchecho", running, n, 1024)
	}
	return nil
}

// busy is the count of sessions of the targets' load: 64, or a quick
// run's smaller one.
func (b *bencher) busy() int {
	if b.r.Quick {
		return b.plan.payloadSessions
	}
	return 64
}

// sharedScenario measures mcpgate as a shared host runs it (see
// gateways.SharedHost) beside the floor and mcpgate's default
// configuration, at 1 session and at the payload loads' sessions.
func (b *bencher) sharedScenario() error {
	shared := sharedHost()
	compared := []*gateways.Gateway{gateways.All()[0], gateways.All()[1], shared}
	if b.baseline != "" {
		compared = append(compared, b.base(gateways.All()[1]), b.base(shared))
	}
	return b.compare("shared", compared, 1, b.busy())
}

// sharedHost is mcpgate-shared, whose client sends staticToken.
func sharedHost() *gateways.Gateway {
	sum := sha256.Sum256([]byte(staticToken))
	return gateways.SharedHost("mcpgate-shared", staticToken, hex.EncodeToString(sum[:]))
}

// benchIssuer serves an authorization server's metadata and JWKS on the
// loopback and returns its URL and an access token it signed, valid for a
// day.
func benchIssuer() (issuer, token string, stop func(), err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	key := jose.JSONWebKey{Key: priv, KeyID: "bench", Algorithm: string(jose.ES256), Use: "sig"}
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL, "jwks_uri": srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	})
	srv = httptest.NewServer(mux)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: priv}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "bench"))
	if err != nil {
		srv.Close()
		return "", "", nil, err
	}
	now := time.Now()
	token, err = jwt.Signed(signer).Claims(jwt.Claims{Issuer: srv.URL, Subject: "bench", Audience: jwt.Audience{"mcpbench"},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(24 * time.Hour))}).Serialize()
	if err != nil {
		srv.Close()
		return "", "", nil, err
	}
	return srv.URL, token, srv.Close, nil
}
