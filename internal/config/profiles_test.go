package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestProfiles(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{
		"mcpgate.toml": "[profiles.ro]\ndescription = \"reading only\"\nbackends = [\"github\", \"fs*\"]\ntools = [\"*\", \"!*delete*\"]\n" +
			"annotations = { readOnlyHint = true, openWorldHint = false }\n" +
			"[clients.ci]\nunix_users = [\"root\"]\nprofile = \"ro\"\nsearch = true\n",
		"conf.d/search.toml": "[profiles.find]\nsearch = true\nmax_added_tools = 8\n",
	})
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, find := cfg.Profiles["ro"], cfg.Profiles["find"]
	want := &Profile{Name: "ro", Description: "reading only", Backends: []string{"github", "fs*"}, Tools: []string{"*", "!*delete*"},
		Resources: []string{"*"}, Prompts: []string{"*"}, Annotations: map[string]bool{"readOnlyHint": true, "openWorldHint": false},
		MaxAddedTools: DefaultMaxAddedTools}
	if !ro.Equal(want) || ro.Line != 1 {
		t.Errorf("ro = %+v, want %+v", ro, want)
	}
	if find == nil || !find.Search || find.MaxAddedTools != 8 || !slices.Equal(find.Backends, []string{"*"}) || !strings.HasSuffix(find.File, "search.toml") {
		t.Errorf("find = %+v", find)
	}
	if c := cfg.Clients["ci"]; c.Profile != "ro" || !c.Search {
		t.Errorf("client ci = %+v", c)
	}
}

func TestProfileErrors(t *testing.T) {
	tests := []struct {
		name, toml string
		want       []string
	}{
		{"bad name", "[profiles.\"a/b\"]\nsearch = true\n", []string{
			`mcpgate.toml:1:11: profiles."a/b": invalid profile name "a/b"; use 1 to 64 letters, digits, "_" or "-" (it is a segment of the endpoint's path)`}},
		{"unknown annotation", "[profiles.x]\nannotations = { readonly = true }\n", []string{
			`mcpgate.toml:2:17: profiles.x.annotations.readonly: unknown key; tools can be selected by destructiveHint, idempotentHint, openWorldHint, readOnlyHint`}},
		{"annotation not a boolean", "[profiles.x]\nannotations = { readOnlyHint = \"yes\" }\n", []string{
			`mcpgate.toml:2:17: profiles.x.annotations.readOnlyHint: expected a boolean, got string "yes"; write true or false, without quotes`}},
		{"unknown key", "[profiles.x]\nbackend = [\"a\"]\n", []string{
			`mcpgate.toml:2:1: profiles.x.backend: unknown key (did you mean "backends"?)`}},
		{"client names a missing profile", "[profiles.readonly]\n[clients.x]\nunix_users = [\"root\"]\nprofile = \"read-only\"\n", []string{
			`mcpgate.toml:4:1: clients.x.profile: profile "read-only" is not configured (did you mean "readonly"?)`}},
		{"client profile name", "[clients.x]\nunix_users = [\"root\"]\nprofile = \"a b\"\n", []string{
			`mcpgate.toml:3:1: clients.x.profile: "a b" is not a profile name; profiles are named with 1 to 64 letters, digits, "_" or "-"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorLines(t, testutil.WriteConfigFiles(t, map[string]string{"mcpgate.toml": tt.toml}))
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
