package access

import (
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// TestUnmatchedPatterns: a pattern that matches no current name is found,
// with a did-you-mean; wildcards alone and patterns that match are not
// (issue 22, item 5).
func TestUnmatchedPatterns(t *testing.T) {
	clients := map[string]*config.Client{
		"ci": {Name: "ci",
			Tools:     []string{"everthing__echo", "everything__get-*", "!everthing__*", "*", "files__*"},
			Resources: []string{"file:///srv/*", "fake://r/9"},
			Prompts:   []string{"*"}},
		"all": {Name: "all", Tools: []string{"*"}, Resources: []string{"*"}, Prompts: []string{"*"}},
	}
	names := Names{
		Tools:     {"everything__echo", "everything__get-sum", "fake__echo"},
		Resources: {"fake://r/0", "fake://r/1", "file:///srv/a"},
	}
	var got []string
	for _, u := range UnmatchedPatterns(clients, names) {
		got = append(got, u.String())
	}
	want := []string{
		`client "ci": tools pattern "everthing__echo" matches no current tool; did you mean "everything__echo"?`,
		`client "ci": tools pattern "!everthing__*" matches no current tool; did you mean "!everything__*"?`,
		`client "ci": tools pattern "files__*" matches no current tool`,
		`client "ci": resources pattern "fake://r/9" matches no current resource; did you mean "fake://r/0" or "fake://r/1"?`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("UnmatchedPatterns:\n got %q\nwant %q", got, want)
	}
}

// TestUnmatchedPrefixes: without a running gateway, --check-config finds
// tool and prompt patterns whose start names no backend.
func TestUnmatchedPrefixes(t *testing.T) {
	cfg := &config.Config{
		Gateway: config.Gateway{CompositePrefix: "composite__"},
		Backends: map[string]*config.Backend{
			"everything": {Name: "everything", ToolPrefix: "everything__"},
			"files":      {Name: "files", ToolPrefix: "files__"},
		},
		Clients: map[string]*config.Client{
			"ci": {Name: "ci",
				Tools:   []string{"everthing__echo", "files__read_*", "fi*", "*", "composite__x", "nothere"},
				Prompts: []string{"evrything__*"}},
		},
	}
	var got []string
	for _, u := range UnmatchedPrefixes(cfg) {
		got = append(got, u.String())
	}
	want := []string{
		`client "ci": tools pattern "everthing__echo" starts with no backend's tool_prefix (nor composite_prefix); did you mean "everything__echo"?`,
		`client "ci": tools pattern "nothere" starts with no backend's tool_prefix (nor composite_prefix)`,
		`client "ci": prompts pattern "evrything__*" starts with no backend's tool_prefix (nor composite_prefix); did you mean "everything__*"?`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("UnmatchedPrefixes:\n got %q\nwant %q", got, want)
	}
	cfg.Backends["bare"] = &config.Backend{Name: "bare", ToolPrefix: ""}
	if u := UnmatchedPrefixes(cfg); len(u) != 0 {
		t.Errorf("with a backend without prefix: %v, want nothing (any name is possible)", u)
	}
}
