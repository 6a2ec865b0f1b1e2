package access

import (
	"crypto/rand"
	"net/http/httptest"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// BenchmarkIdentifyOAuth compares what identifying a request costs with a
// static token and with an OAuth access token: the first time a token is
// seen (signature checked) and afterwards (from the validated-token cache,
// as every later request of a session).
func BenchmarkIdentifyOAuth(b *testing.B) {
	t := b
	ti := newTestIssuer(t)
	key := ti.addKey(t, "es", jose.ES256)
	rsKey := ti.addKey(t, "rs", jose.RS256)
	cfg := oauthConfig(t, ti.srv.URL, `jwks_refresh_interval = "1h"`)
	cfg.Clients["svc"].TokenSHA256 = sha("static-token-0123456789")
	set, _ := NewSet(cfg, Options{})
	run := func(b *testing.B, token string, fresh func() string) {
		r := httptest.NewRequest("POST", testResource, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		b.ReportAllocs()
		for b.Loop() {
			if fresh != nil {
				b.StopTimer()
				r.Header.Set("Authorization", "Bearer "+fresh())
				b.StartTimer()
			}
			if _, ref := set.Identify(r, Peer{}); ref != nil {
				b.Fatal(ref.Reason)
			}
		}
	}
	b.Run("static", func(b *testing.B) { run(b, "static-token-0123456789", nil) })
	b.Run("jwt-cached", func(b *testing.B) { run(b, sign(t, key, claims(ti.srv.URL, nil)), nil) })
	b.Run("jwt-ES256-uncached", func(b *testing.B) {
		run(b, "", func() string { return sign(t, key, claims(ti.srv.URL, map[string]any{"jti": b.Name() + randText()})) })
	})
	b.Run("jwt-RS256-uncached", func(b *testing.B) {
		run(b, "", func() string { return sign(t, rsKey, claims(ti.srv.URL, map[string]any{"jti": randText()})) })
	})
}

func randText() string { return rand.Text() }
