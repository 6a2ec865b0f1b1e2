package config

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// server_card takes "identity" (the default), "tools" or "off"; a
// profile cannot be named server-card, the card's path below an endpoint.
func TestServerCardKey(t *testing.T) {
	for _, tc := range []struct{ toml, want, err string }{
		{"", "identity", ""},
		{"[gateway]\nserver_card = \"tools\"\n", "tools", ""},
		{"[gateway]\nserver_card = \"off\"\n", "off", ""},
		{"[gateway]\nserver_card = true\n", "", "gateway.server_card"},
		{"[profiles.server-card]\ntools = [\"*\"]\n", "", `the profile name "server-card" is reserved`},
	} {
		path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": tc.toml})
		c, err := Load(path)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: Load = %v, want an error with %q", tc.toml, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: Load = %v", tc.toml, err)
		case tc.err == "" && c.Gateway.ServerCard != tc.want:
			t.Errorf("%q: server_card %q, want %q", tc.toml, c.Gateway.ServerCard, tc.want)
		}
	}
}
