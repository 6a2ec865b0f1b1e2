package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestRemoteBackend(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": `[backends.gh]
url = "https://api.example.com/mcp"
headers = { authorization = "Bearer ${credential:gh-token}", X-Team = "a" }
tls_ca_file = "/etc/ssl/ca.pem"
tls_client_cert_file = "/etc/ssl/me.pem"
tls_client_key_file = "/etc/ssl/me.key"
tls_server_name = "mcp.internal"
`})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Remote{
		URL:       "https://api.example.com/mcp",
		Headers:   map[string]string{"Authorization": "Bearer ${credential:gh-token}", "X-Team": "a"},
		TLSCAFile: "/etc/ssl/ca.pem", TLSClientCertFile: "/etc/ssl/me.pem", TLSClientKeyFile: "/etc/ssl/me.key",
		TLSServerName: "mcp.internal", MaxConnections: 8,
	}
	b := c.Backends["gh"]
	if !reflect.DeepEqual(b.Remote, want) || !b.IsRemote() || b.Command != "" || b.Transport != "streamable-http" {
		t.Errorf("Remote = %+v, transport %q; want %+v, streamable-http", b.Remote, b.Transport, want)
	}
	other := *b
	other.Headers = map[string]string{"Authorization": "Bearer x"}
	if b.Equal(&other) {
		t.Error("backends with other headers are Equal")
	}
}

func TestRemoteBackendErrors(t *testing.T) {
	for _, tc := range []struct{ name, toml, want string }{
		{"command and url", `command = "/bin/x"` + "\n" + `url = "https://h/mcp"`, "backends.r.url: a backend has either command"},
		{"process key on remote", `url = "https://h/mcp"` + "\n" + `args = ["x"]`, "backends.r.args: args applies only to a spawned backend"},
		{"env on remote", `url = "https://h/mcp"` + "\n" + `env = { A = "b" }`, "backends.r.env: env applies only to a spawned backend"},
		{"remote key on spawned", `command = "/bin/x"` + "\n" + `headers = { A = "b" }`, "backends.r.headers: headers applies only to a remote backend"},
		{"not http", `url = "ftp://h/mcp"`, `is not an http:// or https:// URL`},
		{"user info", `url = "https://me:secret@h/mcp"`, "holds a user name or password"},
		{"transport", `url = "https://h/mcp"` + "\n" + `transport = "websocket"`, `use one of "stdio", "cli", "streamable-http", "sse"`},
		{"stdio transport on remote", `url = "https://h/mcp"` + "\n" + `transport = "stdio"`, `backends.r.transport: transport = "stdio" is for a backend mcpgate runs itself`},
		{"remote transport on spawned", `command = "/bin/x"` + "\n" + `transport = "sse"`, `backends.r.transport: transport = "sse" is for a remote backend`},
		{"pool on remote", `url = "https://h/mcp"` + "\n" + `instance = "session"`, `backends.r.instance: instance is for a backend whose server mcpgate runs as a process; a remote backend (url) has none`},
		{"runner on remote", `url = "https://h/mcp"` + "\n" + `runner = "unit"`, `backends.r.runner: runner is for a backend whose server mcpgate runs as a process; a remote backend (url) has none`},
		{"on-demand cli", `transport = "cli"` + "\n" + `start = "on-demand"` + "\n" + `tools.t = { command = ["true"] }`, `backends.r.start: start is for a backend whose server mcpgate runs as a process; a cli backend`},
		{"cli with url", `transport = "cli"` + "\n" + `url = "https://h/mcp"` + "\n" + `tools.t = { command = ["true"] }`, `backends.r.url: a cli backend runs its tools' own commands`},
		{"reserved header", `url = "https://h/mcp"` + "\n" + `headers = { mcp-session-id = "x" }`, "Mcp-Session-Id is set by the MCP transport itself"},
		{"bad header name", `url = "https://h/mcp"` + "\n" + `headers = { "a b" = "x" }`, "not a valid HTTP header name"},
		{"header line break", `url = "https://h/mcp"` + "\n" + `headers = { A = "x\ny" }`, "cannot hold a line break"},
		{"bad credential name", `url = "https://h/mcp"` + "\n" + `headers = { A = "${credential:../x}" }`, "in ${credential:../x}"},
		{"tls on http", `url = "http://h/mcp"` + "\n" + `tls_ca_file = "/ca.pem"`, "tls_ca_file needs an https:// url"},
		{"relative ca", `url = "https://h/mcp"` + "\n" + `tls_ca_file = "ca.pem"`, "backends.r.tls_ca_file"},
		{"max_connections 1", `url = "https://h/mcp"` + "\n" + `max_connections = 1`, "backends.r.max_connections"},
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
