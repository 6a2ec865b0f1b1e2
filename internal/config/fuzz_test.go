package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad checks that Load never panics, and that it returns either a
// consistent config or only positioned *Error values.
func FuzzLoad(f *testing.F) {
	seeds := [][2]string{
		{"", ""},
		{"[gateway]\nlisten = [\"127.0.0.1:1\", \"unix:/x\"]\nrequest_timeout = \"1s\"\n", "[gateway]\nbus = \"none\"\n"},
		{backendHeader + "env = { A = \"1\" }\nroots = [\"file:///x\"]\n", backendHeader},
		{"[backends]\ngh = { command = \"x\", args = [[1], {a = 1}] }\n", "[[backends]]\n"},
		{"backends.a.b.c = 1\n[backends.\"x.y\"]\n", "gateway = 1\nx = 1979-05-27\n"},
		{"[gateway]\nmax_message_bytes = 0x7fffffffffffffff\npage_size = -9223372036854775808\n", "[gateway\n"},
		{"[backends.a]\n[backends.a]\n", "[backends.a.env]\nX = 1\n"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, main, dropIn string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "mcpgate.toml")
		if err := os.WriteFile(path, []byte(main), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "conf.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "conf.d", "10.toml"), []byte(dropIn), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			if c != nil {
				t.Fatalf("Load returned a config and error %v", err)
			}
			checkErrorTree(t, err)
			return
		}
		if len(c.Files) != 2 {
			t.Fatalf("Files = %q, want 2", c.Files)
		}
		for name, b := range c.Backends {
			if b.Name != name || !backendName.MatchString(name) || b.Line < 1 {
				t.Fatalf("Backends[%q] = %+v", name, b)
			}
			if b.Enabled && b.Command == "" {
				t.Fatalf("enabled backend %q without command", name)
			}
		}
	})
}
