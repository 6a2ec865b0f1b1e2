package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestCheckConfigResolvesCommands(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "server")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("data"), 0o644)
	tests := []struct {
		name     string
		command  string
		wantCode int
		wantOut  string // in stderr, after FILE:3: backends.x.command: (command is on line 3)
	}{
		{"executable absolute path", script, 0, ""},
		{"bare name on PATH", "sh", 0, ""},
		{"missing absolute path", "/nonexistent/mcp-server", 1, "/nonexistent/mcp-server does not exist"},
		{"not executable", plain, 1, "is not an executable file"},
		{"directory", dir, 1, "is not an executable file"},
		{"bare name not on PATH", "no-such-mcp-server-here", 0, `warning: "no-such-mcp-server-here" is not found on PATH`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "mcpgate.toml")
			os.WriteFile(cfg, []byte("[backends.x]\nargs = []\ncommand = \""+tt.command+"\"\n"), 0o644)
			var stdout, stderr bytes.Buffer
			code := checkConfig(cfg, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if tt.wantOut == "" {
				if stderr.Len() > 0 {
					t.Errorf("stderr = %s; want nothing", stderr.String())
				}
				return
			}
			where := cfg + ":3: backends.x.command: "
			if out := stderr.String(); !strings.HasPrefix(out, where) || !strings.Contains(out, tt.wantOut) {
				t.Errorf("stderr = %s; want %s…%s", out, where, tt.wantOut)
			}
		})
	}
}

// A remote backend has no command to resolve: check-config says nothing.
func TestCheckConfigRemoteBackend(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcpgate.toml")
	os.WriteFile(cfg, []byte("[backends.r]\nurl = \"https://mcp.example.com/mcp\"\n"), 0o644)
	var stdout, stderr bytes.Buffer
	if code := checkConfig(cfg, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
		t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
}

// TestCheckConfigUnitWithoutSystemd: runner = "unit" where no systemd
// answers on the system bus is refused with the reason. (Where one does,
// the e2e test checks the template and polkit refusals.)
func TestCheckConfigUnitWithoutSystemd(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd runs here; internal/e2e covers runner = \"unit\" under systemd")
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	cfg := filepath.Join(t.TempDir(), "mcpgate.toml")
	os.WriteFile(cfg, []byte("[gateway]\nrunner = \"unit\"\n[backends.x]\ncommand = \"sh\"\n"), 0o644)
	var stdout, stderr bytes.Buffer
	code := checkConfig(cfg, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `runner = "unit": cannot reach systemd on the system bus`) {
		t.Errorf("exit %d, stderr %q; want 1 and the reason", code, stderr.String())
	}
}

// TestCheckConfigWarnsAboutUnmatchedPatterns: a client's tools pattern
// whose prefix names no backend is a warning with a did-you-mean, not an
// error (issue 22, item 5).
func TestCheckConfigWarnsAboutUnmatchedPatterns(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcpgate.toml")
	os.WriteFile(cfg, []byte("[backends.everything]\ncommand = \"sh\"\n\n[clients.ci]\ntoken_sha256 = \""+strings.Repeat("ab", 32)+"\"\ntools = [\"everthing__echo\", \"everything__*\"]\n"), 0o644)
	var stdout, stderr bytes.Buffer
	if code := checkConfig(cfg, &stdout, &stderr); code != 0 {
		t.Errorf("exit %d, want 0 (a warning); stderr:\n%s", code, stderr.String())
	}
	want := cfg + `:4: warning: client "ci": tools pattern "everthing__echo" starts with no backend's tool_prefix (nor composite_prefix); did you mean "everything__echo"?` + "\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// check-config says what it can know of each backend's era without
// starting it: probed at every start, legacy for the SSE transport and
// era = "legacy", none for programs; an on-demand backend's cache tells
// its last era.
func TestCheckConfigShowsEras(t *testing.T) {
	state := t.TempDir()
	t.Setenv("STATE_DIRECTORY", state)
	os.MkdirAll(filepath.Join(state, "catalog"), 0o750)
	os.WriteFile(filepath.Join(state, "catalog", "lazy.json"), []byte(`{"version":2,"protocolVersion":"2026-07-28","name":"m","capabilities":{}}`), 0o640)
	cfg := filepath.Join(t.TempDir(), "mcpgate.toml")
	os.WriteFile(cfg, []byte(`[backends.child]
command = "sh"
[backends.old]
url = "https://mcp.example.com/sse"
transport = "sse"
[backends.lazy]
command = "sh"
start = "on-demand"
[backends.told]
command = "sh"
era = "legacy"
`), 0o644)
	var stdout, stderr bytes.Buffer
	if code := checkConfig(cfg, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{
		"  backend child: era probed with server/discover at every start\n",
		"  backend lazy: era probed with server/discover at every start; modern (2026-07-28) at its last start\n",
		"  backend old: era legacy: transport \"sse\" predates server/discover\n",
		"  backend told: era legacy: era = \"legacy\", initialized without server/discover\n",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout = %s; want %q", stdout.String(), want)
		}
	}
}

// TestCheckConfigSaysWhichResource: with OAuth on, --check-config says
// which resource tokens must name on each listen address, and refuses a
// public listener without a configured resource, saying what to set.
func TestCheckConfigSaysWhichResource(t *testing.T) {
	const issuer = "[oauth]\n[oauth.issuers.as]\nissuer = \"https://as.example\"\n"
	var stdout, stderr bytes.Buffer
	cfg := testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[gateway]\nlisten = [\"127.0.0.1:7431\", \"unix:/run/mcpgate/mcpgate.sock\"]\n" + issuer})
	if code := checkConfig(cfg, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := "OAuth resource: http://localhost/mcp on /run/mcpgate/mcpgate.sock; http://127.0.0.1:7431/mcp on 127.0.0.1:7431"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout %q, want it to say %q", stdout.String(), want)
	}
	stdout.Reset()
	cfg = testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": "[gateway]\nlisten = [\"0.0.0.0:7431\"]\n" + issuer})
	if code := checkConfig(cfg, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "0.0.0.0:7431, which is not a loopback address") ||
		!strings.Contains(stderr.String(), "set resource") {
		t.Errorf("a public listener without resource: exit %d, %s", code, stderr.String())
	}
}
