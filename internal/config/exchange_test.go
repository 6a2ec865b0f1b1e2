package config

import (
	"regexp"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestTokenExchange(t *testing.T) {
	const remote = "[backends.up]\nurl = \"https://mcp.example.com/mcp\"\noauth_client_id = \"gw\"\noauth_client_secret_credential = \"gw-secret\"\noauth_issuer = \"https://auth.example.com\"\n"
	cfg, err := Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": remote +
		"oauth_token_exchange = true\noauth_audience = \"mcp-up\"\n" + testIssuer}))
	if err != nil {
		t.Fatal(err)
	}
	if x := cfg.Backends["up"].TokenExchange; x != (TokenExchange{OAuthTokenExchange: true, OAuthAudience: "mcp-up", OAuthExchangeFallback: ExchangeRefuse}) {
		t.Errorf("TokenExchange = %+v, want the exchange on, refusing callers without a token by default", x)
	}
	cfg, err = Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": remote +
		"oauth_token_exchange = true\noauth_exchange_fallback = \"service\"\n" + testIssuer}))
	if err != nil {
		t.Fatal(err)
	}
	if f := cfg.Backends["up"].OAuthExchangeFallback; f != ExchangeService {
		t.Errorf("OAuthExchangeFallback = %q, want service", f)
	}
	if cfg, err = Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": remote})); err != nil || cfg.Backends["up"].OAuthTokenExchange {
		t.Errorf("without oauth_token_exchange: %v, exchange %v; want it off", err, err == nil && cfg.Backends["up"].OAuthTokenExchange)
	}

	// Each error names the file, the line and the key, and says what to do.
	tests := []struct{ name, toml, want string }{
		{"no client id", "[backends.up]\nurl = \"https://mcp.example.com/mcp\"\noauth_token_exchange = true\n" + testIssuer,
			`mcpgate.toml:3:\d+: backends.up.oauth_token_exchange: oauth_token_exchange needs oauth_client_id`},
		{"no [oauth] issuer", remote + "oauth_token_exchange = true\n",
			`mcpgate.toml:1: backends.up.oauth_token_exchange: .*no \[oauth.issuers.NAME\] is configured.*add an issuer, or remove oauth_token_exchange`},
		{"audience without the exchange", remote + "oauth_audience = \"x\"\n" + testIssuer,
			`mcpgate.toml:6:\d+: backends.up.oauth_audience: .*set oauth_token_exchange = true, or remove oauth_audience`},
		{"fallback without the exchange", remote + "oauth_exchange_fallback = \"service\"\n" + testIssuer,
			`mcpgate.toml:6:\d+: backends.up.oauth_exchange_fallback: .*set oauth_token_exchange = true`},
		{"unknown fallback", remote + "oauth_token_exchange = true\noauth_exchange_fallback = \"anonymous\"\n" + testIssuer,
			`mcpgate.toml:7:\d+: backends.up.oauth_exchange_fallback: .*"refuse".*"service"`},
		{"not a boolean", remote + "oauth_token_exchange = \"yes\"\n" + testIssuer,
			`mcpgate.toml:6:\d+: backends.up.oauth_token_exchange: `},
		{"empty audience", remote + "oauth_token_exchange = true\noauth_audience = \"\"\n" + testIssuer,
			`mcpgate.toml:7:\d+: backends.up.oauth_audience: empty`},
		{"spawned backend", "[backends.x]\ncommand = \"x\"\noauth_token_exchange = true\n",
			`backends.x.oauth_token_exchange: .*applies only to a remote backend`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": tt.toml}))
			if err == nil || !regexp.MustCompile(tt.want).MatchString(err.Error()) {
				t.Errorf("error %v, want one matching %q", err, tt.want)
			}
		})
	}
}
