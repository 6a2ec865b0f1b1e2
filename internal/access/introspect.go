package access

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// introspector asks an issuer whether a token is active (RFC 7662),
// authenticating as the gateway's own client.
type introspector struct {
	endpoint string
	clientID string
	secret   string
	ok       bool // the secret could be read
	client   *http.Client
}

// introspection is the part of an RFC 7662 answer the gateway uses.
type introspection struct {
	Active   bool     `json:"active"`
	Scope    string   `json:"scope"`
	ClientID string   `json:"client_id"`
	Sub      string   `json:"sub"`
	Exp      int64    `json:"exp"`
	Nbf      int64    `json:"nbf"`
	Iss      string   `json:"iss"`
	Aud      audience `json:"aud"`
}

// audience is "aud" as a string or an array of them.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var v any
	if err := jsonUnmarshal(b, &v); err != nil {
		return err
	}
	*a = stringsOf(v)
	return nil
}

// introspect asks is whether token is active and for resource.
func (o *OAuth) introspect(ctx context.Context, is *issuer, token, resource string, now time.Time) (*Grant, error) {
	in := is.intro
	if !in.ok {
		return nil, tokenErrorf("issuer %q cannot introspect: the gateway's client secret could not be read (see the warning at start or reload)", is.cfg.Name)
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, tokenErrorf("introspection at issuer %q: %v", is.cfg.Name, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 section 2.3.1: both parts form-encoded first.
	req.SetBasicAuth(url.QueryEscape(in.clientID), url.QueryEscape(in.secret))
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, tokenErrorf("introspection at issuer %q failed: %v", is.cfg.Name, redactURLError(err))
	}
	defer resp.Body.Close()
	var ans introspection
	if err := decodeAnswer(resp, in.endpoint, &ans); err != nil {
		return nil, tokenErrorf("introspection at issuer %q failed: %v", is.cfg.Name, err)
	}
	leeway := o.cfg.Leeway
	auds := o.audiences(is, resource)
	switch {
	case !ans.Active:
		return nil, tokenErrorf("issuer %q says the token is not active (expired, revoked or unknown)", is.cfg.Name)
	case ans.Exp == 0:
		return nil, tokenErrorf("issuer %q gave no exp for the token; access tokens must expire", is.cfg.Name)
	case now.Add(-leeway).After(time.Unix(ans.Exp, 0)):
		return nil, tokenErrorf("the token expired at %s", time.Unix(ans.Exp, 0).UTC().Format(time.RFC3339))
	case ans.Nbf != 0 && now.Add(leeway).Before(time.Unix(ans.Nbf, 0)):
		return nil, tokenErrorf("the token is not valid before %s (nbf)", time.Unix(ans.Nbf, 0).UTC().Format(time.RFC3339))
	case ans.Iss != "" && ans.Iss != is.cfg.Issuer:
		return nil, tokenErrorf("issuer %q introspected a token of issuer %s", is.cfg.Name, quoteShort(ans.Iss))
	case !slices.ContainsFunc(auds, func(a string) bool { return slices.Contains(ans.Aud, a) }):
		return nil, tokenErrorf("the token is for audience [%s], not for this resource (%s); the client must ask for it with resource=%s (RFC 8707)",
			strings.Join(ans.Aud, ", "), strings.Join(auds, ", "), auds[0])
	}
	claims := map[string]any{"sub": ans.Sub, "client_id": ans.ClientID, "scope": ans.Scope}
	return is.grant(claims, ans.Sub, time.Unix(ans.Exp, 0)), nil
}

// redactURLError drops the request from an *url.Error: its text is fine,
// but the form it carried holds the token.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// sameSecrets reports whether the introspection secrets in credentials are
// those o read: a reload after the credential was rotated must use the new
// one.
func (o *OAuth) sameSecrets(credentials string) bool {
	for _, is := range o.intro {
		secret, err := config.ReadCredential(credentials, is.cfg.ClientSecretCredential)
		if err != nil || !is.intro.ok || secret != is.intro.secret {
			return false
		}
	}
	return true
}
