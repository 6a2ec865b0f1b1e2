package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

const testIssuer = "[oauth.issuers.corp]\nissuer = \"https://auth.example.com\"\n"

func TestOAuth(t *testing.T) {
	cfg, err := Load(testutil.WriteConfigFiles(t, map[string]string{
		"mcpgate.toml": "[oauth]\nresource = \"https://mcp.example.com/mcp\"\nleeway = \"5s\"\n" + testIssuer +
			"[clients.ci]\noauth_issuer = \"corp\"\noauth_subjects = [\"ci-runner\"]\noauth_scopes = [\"mcp:tools\"]\n",
		"conf.d/other.toml": "[oauth.issuers.local]\nissuer = \"http://127.0.0.1:9000\"\nintrospection_endpoint = \"http://127.0.0.1:9000/introspect\"\nclient_id = \"gw\"\nclient_secret_credential = \"gw-secret\"\n" +
			"[clients.dev]\noauth_issuer = \"local\"\noauth_groups = [\"devs\"]\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.OAuth
	if !o.Enabled() || o.Resource != "https://mcp.example.com/mcp" || o.Leeway != 5*time.Second || o.JWKSRefreshInterval != time.Minute || len(o.Issuers) != 2 {
		t.Errorf("OAuth = %+v", o)
	}
	if c := o.Issuers["corp"]; !slices.Equal(c.Algorithms, []string{"RS256", "ES256", "EdDSA"}) || c.ClientClaim != "sub" || c.Line != 4 {
		t.Errorf("corp = %+v", c)
	}
	if ci := cfg.Clients["ci"]; ci.OAuthIssuer != "corp" || !slices.Equal(ci.OAuthScopes, []string{"mcp:tools"}) {
		t.Errorf("ci = %+v", ci)
	}
}

func TestOAuthErrors(t *testing.T) {
	tests := []struct {
		name, toml, want string
	}{
		{"no issuer", "[oauth]\nleeway = \"5s\"\n", "[oauth] names no issuer"},
		{"auth none", "[gateway]\nauth = \"none\"\n" + testIssuer, `no effect with [gateway] auth = "none"`},
		{"no issuer url", "[oauth.issuers.corp]\njwks_uri = \"https://a.example/jwks\"\n", "the issuer has no issuer URL"},
		{"plain http", "[oauth.issuers.corp]\nissuer = \"http://auth.example.com\"\n", "plain http"},
		{"alg none", testIssuer + "algorithms = [\"none\"]\n", "never allowed"},
		{"alg HS256", testIssuer + "algorithms = [\"RS256\", \"HS256\"]\n", "shared-secret algorithm"},
		{"jwks and introspection", testIssuer + "jwks_uri = \"https://a.example/jwks\"\nintrospection_endpoint = \"https://a.example/i\"\nclient_id = \"x\"\nclient_secret_credential = \"s\"\n", "not both"},
		{"introspection without secret", testIssuer + "introspection_endpoint = \"https://a.example/i\"\nclient_id = \"x\"\n", "introspection needs the gateway's own client_id and client_secret_credential"},
		{"client id without introspection", testIssuer + "client_id = \"x\"\n", "client_id is used only for introspection"},
		{"client without issuer", "[clients.x]\noauth_subjects = [\"a\"]\n", "no [oauth.issuers.NAME] is configured"},
		{"unknown issuer", testIssuer + "[clients.x]\noauth_issuer = \"nope\"\noauth_subjects = [\"a\"]\n", `no issuer "nope"`},
		{"scopes without identity", testIssuer + "[clients.x]\nunix_users = [\"0\"]\noauth_scopes = [\"a\"]\n", "neither oauth_subjects nor oauth_groups"},
		{"ambiguous issuer", testIssuer + "[oauth.issuers.b]\nissuer = \"https://b.example\"\n[clients.x]\noauth_subjects = [\"a\"]\n", "say whose tokens name it with oauth_issuer"},
		{"trusted proxies", "[oauth]\nresource = \"https://a.example/mcp\"\ntrusted_proxies = [\"10.0.0.5\"]\n" + testIssuer, "mcpgate.toml:3:1: oauth.trusted_proxies: trusted_proxies was removed: the resource is no longer taken from X-Forwarded-Host"},
		{"resource with query", "[oauth]\nresource = \"https://a.example/mcp?x=1\"\n" + testIssuer, "has a query"},
		{"scope with space", "[oauth]\nscopes_required = [\"a b\"]\n" + testIssuer, "is not a scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": tt.toml}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestRemoteOAuth(t *testing.T) {
	const remote = "[backends.up]\nurl = \"https://mcp.example.com/mcp\"\n"
	cfg, err := Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": remote +
		"oauth_client_id = \"gw\"\noauth_client_secret_credential = \"gw-secret\"\noauth_scopes = [\"mcp:tools\"]\noauth_issuer = \"https://auth.example.com\"\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Backends["up"].RemoteOAuth; o.OAuthClientID != "gw" || o.OAuthResource != "https://mcp.example.com/mcp" || !slices.Equal(o.OAuthScopes, []string{"mcp:tools"}) ||
		o.OAuthIssuer != "https://auth.example.com" || o.OAuthRetryInterval != DefaultOAuthRetryInterval {
		t.Errorf("RemoteOAuth = %+v", o)
	}
	tests := []struct{ name, toml, want string }{
		{"no credential", remote + "oauth_client_id = \"gw\"\n", "set one of oauth_client_secret_credential"},
		{"both credentials", remote + "oauth_client_id = \"gw\"\noauth_client_secret_credential = \"a\"\noauth_private_key_credential = \"b\"\n", "set one of"},
		{"no client id", remote + "oauth_client_secret_credential = \"a\"\n", "needs oauth_client_id"},
		{"and an Authorization header", remote + "oauth_client_id = \"gw\"\noauth_client_secret_credential = \"a\"\noauth_issuer = \"https://a.example\"\nheaders = { Authorization = \"Bearer x\" }\n", "headers sets Authorization"},
		{"spawned backend", "[backends.x]\ncommand = \"x\"\noauth_client_id = \"gw\"\n", "applies only to a remote backend"},
		{"plain http endpoint", remote + "oauth_client_id = \"gw\"\noauth_client_secret_credential = \"a\"\noauth_token_endpoint = \"http://auth.example.com/token\"\n", "plain http"},
		{"plain http issuer", remote + "oauth_client_id = \"gw\"\noauth_client_secret_credential = \"a\"\noauth_issuer = \"http://auth.example.com\"\n", "plain http"},
		{"no authorization server", remote + "oauth_client_id = \"gw\"\noauth_client_secret_credential = \"a\"\n", "set oauth_issuer, the issuer URL of the authorization server you trust"},
		{"issuer and endpoint", remote + "oauth_client_id = \"gw\"\noauth_client_secret_credential = \"a\"\noauth_issuer = \"https://a.example\"\noauth_token_endpoint = \"https://a.example/token\"\n", "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": tt.toml}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
