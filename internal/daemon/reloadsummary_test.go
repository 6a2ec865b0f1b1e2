package daemon

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// TestClientChange: the reload summary names the clients added, removed
// and changed (issue 22, item 10).
func TestClientChange(t *testing.T) {
	client := func(name, file string, tools ...string) *config.Client {
		return &config.Client{Name: name, File: file, Line: len(file), TokenSHA256: "ab", Tools: tools}
	}
	before := map[string]*config.Client{
		"local": client("local", "a.toml", "*"),
		"ci":    client("ci", "a.toml", "x__*"),
		"old":   client("old", "a.toml"),
		"moved": client("moved", "a.toml", "*"),
	}
	after := map[string]*config.Client{
		"local": client("local", "a.toml", "*"),
		"ci":    client("ci", "a.toml", "y__*"),
		"new":   client("new", "b.toml"),
		"moved": client("moved", "conf.d/moved.toml", "*"),
	}
	if got, want := clientChange(before, after), "clients added new; clients removed old; clients changed ci"; got != want {
		t.Errorf("clientChange = %q, want %q", got, want)
	}
	if got := clientChange(before, before); got != "" {
		t.Errorf("clientChange of the same clients = %q, want \"\"", got)
	}
}
