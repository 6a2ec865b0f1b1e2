package man_test

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// oauthIssuerBase is the least [oauth] an oauth key's example needs.
const oauthIssuerBase = "[oauth.issuers.corp]\nissuer = \"https://auth.example.com\"\n"

// checkOAuthKey checks an [oauth] or [oauth.issuers.NAME] key's example
// and default. needs holds the other keys the example needs, if any.
func checkOAuthKey(t *testing.T, key, name, def, example, needs string) {
	t.Helper()
	load := func(text string) (*config.Config, error) {
		return config.Load(testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": text}))
	}
	var base, exampleBase string
	if strings.HasPrefix(key, "oauth.issuers.") {
		base = oauthIssuerBase
		exampleBase = base
		if name == "issuer" {
			exampleBase = "[oauth.issuers.corp]\n"
		}
		if needs != "" {
			exampleBase += strings.ReplaceAll(needs, "\", ", "\"\n") + "\n"
		}
	} else {
		base = "[oauth]\n"
		exampleBase = "[oauth]\n" + example + "\n" + oauthIssuerBase
		example = ""
	}
	if _, err := load(exampleBase + example + "\n"); err != nil {
		t.Errorf("example: %v", err)
	}
	if strings.HasPrefix(def, "none") || name == "issuer" {
		return
	}
	if !strings.HasPrefix(key, "oauth.issuers.") {
		base += oauthIssuerBase
	}
	unset, err := load(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append([]string{def}, defaultValues(def)...) {
		text := base + name + " = " + v + "\n"
		if !strings.HasPrefix(key, "oauth.issuers.") {
			text = "[oauth]\n" + name + " = " + v + "\n" + oauthIssuerBase
		}
		set, err := load(text)
		if err != nil {
			continue
		}
		if !set.OAuth.Equal(&unset.OAuth) {
			t.Errorf("documented default %q is not the real default:\n got %+v\nwant %+v", def, set.OAuth, unset.OAuth)
		}
		return
	}
	t.Errorf("default %q holds no TOML value to compare with the real default", def)
}

// remoteOAuthBase is the least backend an oauth_* key of a remote backend
// needs besides itself.
func remoteOAuthBase(name string) string {
	base := "[backends.x]\nurl = \"https://mcp.example.com/mcp\"\n"
	issuer := "oauth_issuer = \"https://auth.example.com\"\n"
	switch name {
	case "oauth_client_id":
		return base + issuer + "oauth_client_secret_credential = \"s\"\n"
	case "oauth_client_secret_credential", "oauth_private_key_credential":
		return base + issuer + "oauth_client_id = \"mcpgate\"\n"
	case "oauth_issuer", "oauth_token_endpoint":
		return base + "oauth_client_id = \"mcpgate\"\noauth_client_secret_credential = \"s\"\n"
	case "oauth_token_exchange", "oauth_audience", "oauth_exchange_fallback":
		// The exchange needs callers with OAuth tokens: an [oauth] issuer.
		base = "[gateway]\nauth = \"required\"\n[oauth.issuers.corp]\nissuer = \"https://auth.example.com\"\n" + base
		if name != "oauth_token_exchange" {
			base += "oauth_token_exchange = true\n"
		}
	}
	return base + issuer + "oauth_client_id = \"mcpgate\"\noauth_client_secret_credential = \"s\"\n"
}
