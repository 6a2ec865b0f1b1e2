package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// How the gateway finds the token endpoint of a remote backend's
// authorization server: only from the issuer the configuration names.

// discover finds the token endpoint of oauth_issuer, the authorization
// server the operator trusts: its metadata (RFC 8414, else OpenID Connect
// discovery) must name that issuer exactly and a token endpoint on https
// (or http on a loopback host). The server's own protected resource
// metadata (RFC 9728) is read too, when it has one: its resource must be
// the backend's, and its authorization servers must list the issuer.
// Nothing the server says chooses where the secret goes.
func (s *tokenSource) discover(ctx context.Context) (string, error) {
	issuer := s.cfg.OAuthIssuer
	if err := s.checkResourceMetadata(ctx, issuer); err != nil {
		return "", err
	}
	iu, err := url.Parse(issuer)
	if err != nil {
		return "", fmt.Errorf("oauth_issuer %q: %v", issuer, err)
	}
	var errs []string
	path := strings.TrimSuffix(iu.Path, "/")
	for _, p := range []string{"/.well-known/oauth-authorization-server" + path, path + "/.well-known/openid-configuration"} {
		mu := *iu
		mu.Path = p
		var md struct {
			Issuer        string `json:"issuer"`
			TokenEndpoint string `json:"token_endpoint"`
		}
		if err := s.getJSON(ctx, mu.String(), &md); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		switch {
		case md.Issuer != issuer:
			errs = append(errs, fmt.Sprintf("%s names issuer %s, not %s", mu.String(), quoteClaim(md.Issuer), issuer))
		case md.TokenEndpoint == "":
			errs = append(errs, mu.String()+" names no token_endpoint")
		case !secureURL(md.TokenEndpoint):
			errs = append(errs, fmt.Sprintf("%s names token endpoint %s, which is not https:// (plain http only on a loopback host)", mu.String(), quoteClaim(md.TokenEndpoint)))
		default:
			return md.TokenEndpoint, nil
		}
	}
	return "", fmt.Errorf("no token endpoint for oauth_issuer %s (%s); set oauth_token_endpoint instead", issuer, strings.Join(errs, "; "))
}

// checkResourceMetadata reads the server's protected resource metadata,
// if it has any, and refuses one that is for another resource or does
// not list issuer.
func (s *tokenSource) checkResourceMetadata(ctx context.Context, issuer string) error {
	u, err := url.Parse(s.url)
	if err != nil {
		return err
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.Path, "/"), "/.well-known/oauth-protected-resource"} {
		mu := url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}
		var prm struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if s.getJSON(ctx, mu.String(), &prm) != nil {
			continue // none there: the configured issuer is all there is
		}
		switch {
		case prm.Resource != s.cfg.OAuthResource && prm.Resource != s.url:
			return fmt.Errorf("the server's resource metadata %s is for resource %s, not %s; the gateway sends its secret to no authorization server it names", mu.String(), quoteClaim(prm.Resource), s.cfg.OAuthResource)
		case !slices.Contains(prm.AuthorizationServers, issuer):
			return fmt.Errorf("the server's resource metadata %s names authorization servers %s, not oauth_issuer %s; fix oauth_issuer if the server moved", mu.String(), quoteClaims(prm.AuthorizationServers), issuer)
		}
		return nil
	}
	return nil
}

// secureURL reports whether u is https, or http on a loopback host.
func secureURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return false
	}
	if p.Scheme == "https" {
		return true
	}
	ip := net.ParseIP(p.Hostname())
	return p.Scheme == "http" && (p.Hostname() == "localhost" || ip != nil && ip.IsLoopback())
}

// quoteClaim quotes a value a server sent, cut short, for a message.
func quoteClaim(v string) string {
	if len(v) > 120 {
		v = v[:120] + "…"
	}
	return strconv.Quote(v)
}

func quoteClaims(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	if len(vs) > 5 {
		vs = append(vs[:5:5], fmt.Sprintf("and %d more", len(vs)-5))
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = quoteClaim(v)
	}
	return strings.Join(q, ", ")
}

func (s *tokenSource) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxOAuthAnswer)).Decode(v)
}
