package access

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// maxMetadataBytes bounds a metadata, JWKS or introspection answer.
const maxMetadataBytes = 1 << 20

// keySet is an issuer's JWKS, fetched when first needed, again when it is
// older than maxAge, and when a token names a key it lacks, but then at
// most once per interval: tokens with made-up key ids cannot make the
// gateway hammer the issuer.
type keySet struct {
	issuer   string
	uri      string // "" until discovered
	client   *http.Client
	interval time.Duration
	maxAge   time.Duration

	current atomic.Pointer[fetchedKeys]
	mu      sync.Mutex // one fetch at a time; guards uri and tried
	tried   time.Time  // start of the last fetch, successful or not
	fetches atomic.Int64
}

// fetchedKeys is one fetch of the JWKS.
type fetchedKeys struct {
	set jose.JSONWebKeySet
	at  time.Time
}

func newKeySet(issuer, uri string, client *http.Client, interval, maxAge time.Duration) *keySet {
	return &keySet{issuer: issuer, uri: uri, client: client, interval: interval, maxAge: maxAge}
}

// Fetches returns how many times the JWKS (or the metadata naming it) was
// fetched.
func (k *keySet) Fetches() int64 { return k.fetches.Load() }

// key returns the public key with id kid usable with alg.
func (k *keySet) key(ctx context.Context, kid, alg string) (*jose.JSONWebKey, error) {
	now := time.Now()
	if f := k.current.Load(); f != nil && now.Sub(f.at) < k.maxAge {
		if key := f.find(kid, alg); key != nil {
			return key, nil
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// Another request may have fetched while this one waited.
	f := k.current.Load()
	if f != nil && time.Since(f.at) < k.maxAge {
		if key := f.find(kid, alg); key != nil {
			return key, nil
		}
	}
	if !k.tried.IsZero() && time.Since(k.tried) < k.interval {
		if key := f.find(kid, alg); key != nil {
			return key, nil // old, but refetching failed a moment ago
		}
		return nil, tokenErrorf("no key %s for %s in the issuer's JWKS (fetched again at most every %s)", quoteShort(kid), alg, k.interval)
	}
	k.tried = time.Now()
	nf, err := k.fetch(ctx)
	if err != nil {
		if key := f.find(kid, alg); key != nil {
			return key, nil
		}
		return nil, &TokenError{err.Error()}
	}
	k.current.Store(nf)
	if key := nf.find(kid, alg); key != nil {
		return key, nil
	}
	return nil, tokenErrorf("no key %s for %s in the issuer's JWKS", quoteShort(kid), alg)
}

// find returns the public key with id kid (any, if kid is empty and one
// key fits) that may verify alg.
func (f *fetchedKeys) find(kid, alg string) *jose.JSONWebKey {
	if f == nil {
		return nil
	}
	var found *jose.JSONWebKey
	for i := range f.set.Keys {
		key := &f.set.Keys[i]
		if (kid != "" && key.KeyID != kid) || !key.IsPublic() || !key.Valid() {
			continue
		}
		if key.Algorithm != "" && key.Algorithm != alg {
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if found != nil { // without a kid, two candidates are one too many
			return nil
		}
		found = key
	}
	return found
}

// fetch discovers the JWKS URI if needed and fetches the keys.
func (k *keySet) fetch(ctx context.Context) (*fetchedKeys, error) {
	if k.uri == "" {
		uri, err := discoverJWKS(ctx, k.client, k.issuer, &k.fetches)
		if err != nil {
			return nil, err
		}
		k.uri = uri
	}
	k.fetches.Add(1)
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, k.client, k.uri, &set); err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	return &fetchedKeys{set: set, at: time.Now()}, nil
}

// discoverJWKS finds the issuer's jwks_uri in its RFC 8414 metadata, else
// its OpenID Connect discovery document. Either must name the issuer
// exactly (RFC 8414 section 3.3).
func discoverJWKS(ctx context.Context, client *http.Client, issuer string, fetches *atomic.Int64) (string, error) {
	var errs []string
	for _, u := range MetadataURLs(issuer) {
		fetches.Add(1)
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := getJSON(ctx, client, u, &md); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		switch {
		case md.Issuer != issuer:
			errs = append(errs, fmt.Sprintf("%s names issuer %s, not %q", u, quoteShort(md.Issuer), issuer))
		case md.JWKSURI == "":
			errs = append(errs, u+" has no jwks_uri")
		default:
			return md.JWKSURI, nil
		}
	}
	return "", fmt.Errorf("discovering the keys of issuer %s: %s; set jwks_uri", issuer, strings.Join(errs, "; "))
}

// MetadataURLs returns where an issuer's metadata is: the RFC 8414 URL
// (the well-known part between host and path), then the OpenID Connect
// discovery URL (appended to the path).
func MetadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.TrimSuffix(u.Path, "/")
	oauth := *u
	oauth.Path = "/.well-known/oauth-authorization-server" + path
	oidc := *u
	oidc.Path = path + "/.well-known/openid-configuration"
	return []string{oauth.String(), oidc.String()}
}

// getJSON GETs u and decodes its JSON answer into v.
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeAnswer(resp, u, v)
}

// decodeAnswer decodes a JSON answer of at most maxMetadataBytes.
func decodeAnswer(resp *http.Response, u string, v any) error {
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
		return fmt.Errorf("%s answered %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(v); err != nil {
		return fmt.Errorf("%s: not a JSON answer: %v", u, err)
	}
	return nil
}
