package config

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// A remote backend on a unix socket: url = "unix:SOCKET:PATH" is read into
// the socket and the endpoint its requests go to, and every way to write
// it wrong is refused with how to write it.
func TestRemoteUnixURL(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `[backends.w]
url = "unix:/run/weather/mcp.sock:/mcp?k=v"
`})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Backends["w"]
	if !b.IsRemote() || b.Transport != "streamable-http" {
		t.Errorf("IsRemote %v, transport %q; want a streamable-http remote", b.IsRemote(), b.Transport)
	}
	if got := b.UnixSocket(); got != "/run/weather/mcp.sock" {
		t.Errorf("UnixSocket = %q", got)
	}
	if got := b.Endpoint(); got != "http://localhost/mcp?k=v" {
		t.Errorf("Endpoint = %q", got)
	}
	tcp := Remote{URL: "https://h/mcp"}
	if tcp.UnixSocket() != "" || tcp.Endpoint() != "https://h/mcp" {
		t.Errorf("a TCP url: socket %q, endpoint %q", tcp.UnixSocket(), tcp.Endpoint())
	}

	for _, tc := range []struct{ name, toml, want string }{
		{"relative socket", `url = "unix:run/w.sock:/mcp"`, `names no absolute socket path`},
		{"no HTTP path", `url = "unix:/run/w.sock"`, `names no HTTP path after the socket's`},
		{"HTTP path not absolute", `url = "unix:/run/w.sock:mcp"`, `names no HTTP path after the socket's`},
		{"fragment", `url = "unix:/run/w.sock:/mcp#x"`, `a fragment`},
		{"TLS", `url = "unix:/run/w.sock:/mcp"` + "\n" + `tls_ca_file = "/etc/ca.pem"`, `tls_ca_file needs an https:// url`},
		{"sse", `url = "unix:/run/w.sock:/mcp"` + "\n" + `transport = "sse"`, `not served on a unix socket`},
		{"oauth without a resource", `url = "unix:/run/w.sock:/mcp"` + "\n" + `oauth_client_id = "gw"` + "\n" + `oauth_client_secret_credential = "s"` + "\n" + `oauth_issuer = "https://as.example"`, `set oauth_resource`},
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
