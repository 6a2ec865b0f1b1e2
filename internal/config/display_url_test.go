package config

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// display_url is read for a remote backend, checked like url, refused on
// a spawned backend and with a credential, and a change is a change of
// the backend.
func TestRemoteDisplayURL(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `[backends.gh]
url = "https://api.example.com/mcp/s3cr3t-path-key"
display_url = "https://api.example.com/mcp/"
`})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Backends["gh"]
	if b.DisplayURL != "https://api.example.com/mcp/" {
		t.Errorf("DisplayURL = %q", b.DisplayURL)
	}
	other := *b
	other.DisplayURL = ""
	if b.Equal(&other) {
		t.Error("backends with another display_url are Equal")
	}

	for _, tc := range []struct{ name, toml, want string }{
		{"not a URL", `url = "https://h/mcp"` + "\n" + `display_url = "mcp at h"`, `backends.r.display_url: "mcp at h" is not an http:// or https:// URL`},
		{"user info", `url = "https://h/mcp"` + "\n" + `display_url = "https://me:pw@h/mcp"`, "backends.r.display_url: the URL holds a user name or password"},
		{"credential", `url = "https://h/mcp"` + "\n" + `display_url = "https://h/${credential:k}"`, "backends.r.display_url: display_url is shown in logs, D-Bus and status and is never sent"},
		{"on a spawned backend", `command = "/bin/x"` + "\n" + `display_url = "https://h/mcp"`, "backends.r.display_url: display_url applies only to a remote backend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[backends.r]\n" + tc.toml + "\n"})
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
