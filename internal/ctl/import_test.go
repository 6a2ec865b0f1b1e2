package ctl

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

var updateImport = flag.Bool("update-import", false, "rewrite the golden files of the import tests")

// TestImport converts a sample of each format, compares the output with
// its golden file, and loads it as mcpgate's configuration.
func TestImport(t *testing.T) {
	for _, tc := range []struct {
		file     string
		backends []string // as config.Load sees them
		summary  string   // on stderr, after the file name
		check    func(t *testing.T, cfg *config.Config)
	}{
		{"claude_desktop_config.json", []string{"filesystem", "github", "my_weather_server", "my_weather_server_2"}, "; check the output's 1 TODO comment", func(t *testing.T, cfg *config.Config) {
			fs := cfg.Backends["filesystem"]
			if fs.Command != "npx" || !slices.Equal(fs.Args, []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/alice/Desktop", "/srv/shared"}) {
				t.Errorf("filesystem = %q %q", fs.Command, fs.Args)
			}
			if got := cfg.Backends["github"].Env["GITHUB_PERSONAL_ACCESS_TOKEN"]; got != "ghp_exampletoken" {
				t.Errorf("github's token = %q, want the literal value copied", got)
			}
			// "my.weather server" sorts first and becomes my_weather_server_2:
			// the name that was valid already keeps it.
			w := cfg.Backends["my_weather_server_2"]
			if w.Command != "/usr/local/bin/weather-mcp" || w.Args[3] != "say \"hi\"\tnow ✓" {
				t.Errorf("my.weather server = %q %q", w.Command, w.Args)
			}
			if !maps.Equal(w.Env, map[string]string{"API_PORT": "8080", "VERBOSE": "true"}) {
				t.Errorf("my.weather server's env = %v", w.Env)
			}
			if cfg.Backends["my_weather_server"].Command != "uvx" {
				t.Errorf("my_weather_server = %+v", cfg.Backends["my_weather_server"])
			}
		}},
		{"claude_code.mcp.json", []string{"airtable", "internal-api", "project-tools", "sentry"}, " (2 remote); check the output's 4 TODO comments", func(t *testing.T, cfg *config.Config) {
			api := cfg.Backends["internal-api"]
			if api.URL != "https://api.example.com/sse" || api.Transport != "sse" || api.Enabled ||
				!maps.Equal(api.Headers, map[string]string{"Authorization": "Bearer ${credential:api-key}", "X-Team": "core"}) {
				t.Errorf("internal-api = %+v, want a disabled SSE remote whose token comes from credential api-key", api.Remote)
			}
			if s := cfg.Backends["sentry"]; s.URL != "https://mcp.sentry.dev/mcp" || s.Transport != "streamable-http" || !s.Enabled {
				t.Errorf("sentry = %+v, want an enabled Streamable HTTP remote", s.Remote)
			}
			if env := cfg.Backends["airtable"].Env; len(env) != 0 {
				t.Errorf("airtable's env = %v, want the references left commented out", env)
			}
			if cfg.Backends["project-tools"].Enabled {
				t.Error("project-tools is enabled with ${CLAUDE_PROJECT_DIR:-.} in its command")
			}
		}},
		{"vscode_mcp.json", []string{"Perplexity", "fetch", "github", "memory", "playwright"}, " (1 remote); check the output's 6 TODO comments", func(t *testing.T, cfg *config.Config) {
			if gh := cfg.Backends["github"]; gh.URL != "https://api.githubcopilot.com/mcp/" {
				t.Errorf("github = %+v", gh.Remote)
			}
			if env := cfg.Backends["Perplexity"].Env; !maps.Equal(env, map[string]string{"TIMEOUT": "30s"}) {
				t.Errorf("Perplexity's env = %v, want only TIMEOUT; the input, the editor's variable, the reserved and the invalid name commented out", env)
			}
			if cfg.Backends["playwright"].Enabled || cfg.Backends["fetch"].Enabled || !cfg.Backends["memory"].Enabled {
				t.Error("want playwright (${workspaceFolder}) and fetch (disabled) disabled, memory enabled")
			}
			if cfg.Backends["memory"].Cwd != "/srv/mcp" {
				t.Errorf("memory's cwd = %q", cfg.Backends["memory"].Cwd)
			}
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := filepath.Join("testdata", "import", tc.file)
			var stdout, stderr bytes.Buffer
			if code := runImport([]string{in}, &stdout, &stderr); code != 0 {
				t.Fatalf("import %s = %d: %s", in, code, stderr.String())
			}
			wantSummary := fmt.Sprintf("mcpgatectl import: %d backends from %s%s\n", len(tc.backends), in, tc.summary)
			if stderr.String() != wantSummary {
				t.Errorf("stderr = %q, want %q", stderr.String(), wantSummary)
			}
			golden := strings.TrimSuffix(in, filepath.Ext(in)) + ".toml"
			if *updateImport {
				if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestImport -update-import to create it)", err)
			}
			if !bytes.Equal(stdout.Bytes(), want) {
				t.Errorf("output differs from %s (run with -update-import to accept it):\n%s", golden, stdout.String())
			}

			path := filepath.Join(t.TempDir(), "mcpgate.toml")
			if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("config.Load of the output: %v\n%s", err, stdout.String())
			}
			if got := slices.Sorted(maps.Keys(cfg.Backends)); !slices.Equal(got, tc.backends) {
				t.Errorf("backends = %q, want %q", got, tc.backends)
			}
			tc.check(t, cfg)
		})
	}
}

// TestImportIsDeterministic: map order does not leak into the output.
func TestImportIsDeterministic(t *testing.T) {
	in := filepath.Join("testdata", "import", "vscode_mcp.json")
	var first bytes.Buffer
	runImport([]string{in}, &first, &bytes.Buffer{})
	for range 20 {
		var again bytes.Buffer
		runImport([]string{in}, &again, &bytes.Buffer{})
		if !bytes.Equal(first.Bytes(), again.Bytes()) {
			t.Fatal("two imports of the same file differ")
		}
	}
}

func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", nil, 2, "give one file"},
		{"two files", []string{"a", "b"}, 2, "give one file"},
		{"missing", []string{filepath.Join(dir, "missing.json")}, 1, "no such file or directory"},
		{"syntax error", []string{write("bad.json", "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"a\" \"args\": []}\n  }\n}\n")}, 1, "bad.json:3:26: invalid JSON"},
		{"no server list", []string{write("other.json", `{"theme": "dark"}`)}, 1, `no "mcpServers" or "servers" object`},
		{"args not a list", []string{write("args.json", `{"mcpServers": {"x": {"command": "a", "args": "-v"}}}`)}, 1, `server "x" in "mcpServers": "args" must not be string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runImport(tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Errorf("import %q = %d, stderr %q, stdout %q; want %d and %q", tc.args, code, stderr.String(), stdout.String(), tc.code, tc.want)
			}
		})
	}
}

// TestImportEdgeCases converts small documents and loads the results.
func TestImportEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		backends   []string
		want       []string // in the output
	}{
		{"settings.json", `{"editor.fontSize": 14, "mcp": {"servers": {"a": {"command": "a"}}}}`, []string{"a"}, []string{"[backends.a]"}},
		{"empty", `{"servers": {}}`, nil, []string{"lists no servers"}},
		{"names", `{"mcpServers": {"": {"command": "a"}, "@scope/pkg": {"command": "b"}, "` + strings.Repeat("x", 70) + `": {"command": "c"}, "é": {"command": "d"}}}`,
			[]string{"_", "_scope_pkg", "server", strings.Repeat("x", 64)}, []string{`Named "@scope/pkg"`}},
		{"no command", `{"mcpServers": {"a": {"args": ["x"]}, "b": {"command": ""}, "c": {"command": "c", "args": [{"x": 1}]}}}`, nil,
			[]string{`TODO: "a" has neither a command nor a url`, `TODO: "b" has no usable command`, `TODO: "c": argument 1 is {"x": 1}`}},
		{"remote without url", `{"servers": {"r": {"type": "sse"}}}`, nil, []string{`"r" is a remote server (type "sse") without a url; it was not imported`}},
		{"websocket", `{"servers": {"w": {"type": "ws", "url": "wss://h/mcp"}}}`, nil, []string{`over http:// or https:// only`}},
		{"user in url", `{"servers": {"u": {"url": "https://me:pw@h/mcp"}}}`, nil, []string{`holds a user name or password`}},
		{"header from a VS Code input", `{"inputs": [{"id": "gh-pat", "password": true}], "servers": {"g": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${input:gh-pat}"}}}}`,
			[]string{"g"}, []string{`Authorization = "Bearer ${credential:gh-pat}"`, "LoadCredential=gh-pat (the secret in /etc/credstore/gh-pat)"}},
		{"header from an editor variable", `{"servers": {"g": {"type": "http", "url": "https://h/mcp", "headers": {"X-Dir": "${workspaceFolder}", "X-Env": "${env:TEAM_ID}"}}}}`,
			[]string{"g"}, []string{`# X-Dir = "${workspaceFolder}"`, `X-Env = "${credential:team-id}"`}},
		{"windows path", `{"mcpServers": {"w": {"command": "C:\\tools\\srv.exe"}}}`, []string{"w"}, []string{"macOS or Windows path"}},
		{"control characters", `{"mcpServers": {"c": {"command": "a", "args": ["\u0001\u007f\\"]}}}`, []string{"c"}, []string{`args = ["\u0001\u007F\\"]`}},
		{"NUL", `{"mcpServers": {"n": {"command": "a\u0000"}, "e": {"command": "e", "env": {"K": "a\u0000"}}}}`, []string{"e"}, []string{"NUL character"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := importServers("test.json", []byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			path := filepath.Join(t.TempDir(), "mcpgate.toml")
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("config.Load: %v\n%s", err, out)
			}
			if got := slices.Sorted(maps.Keys(cfg.Backends)); !slices.Equal(got, tc.backends) {
				t.Errorf("backends = %q, want %q\n%s", got, tc.backends, out)
			}
		})
	}
}

func TestImportStripJSONC(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": "// not a comment", "b": "/* nor this */"}`, `{"a": "// not a comment", "b": "/* nor this */"}`},
		{"{\"a\": 1, // comment\n\"b\": [1, 2,],}", "{\"a\": 1,           \n\"b\": [1, 2 ] }"},
		{`{"a": "\"", /* x */ "b": 2}`, `{"a": "\"",         "b": 2}`},
		{`{"a": [1, /* c */ ]}`, `{"a": [1          ]}`},
	} {
		if got := string(importStripJSONC([]byte(tc.in))); got != tc.want {
			t.Errorf("strip %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}
