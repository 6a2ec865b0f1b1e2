package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/backend"
)

func raws(items ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}

func TestBuildPrefixesAndRoutes(t *testing.T) {
	c := Build([]Source{
		{Backend: "fs", Prefix: "fs__", Lists: &backend.Lists{
			Tools:     raws(`{"name":"read","description":"Read a file","inputSchema":{"type":"object"}}`),
			Prompts:   raws(`{"name":"summarize"}`),
			Resources: raws(`{"uri":"file:///etc/hosts","name":"hosts"}`),
			Templates: raws(`{"uriTemplate":"file:///srv/{path}","name":"srv"}`),
		}},
		{Backend: "gh", Prefix: "", Lists: &backend.Lists{
			Tools: raws(`{"name":"search_issues","inputSchema":{}}`),
		}},
	})
	tool, ok := c.Tool("fs__read")
	if !ok || tool.Backend != "fs" || tool.Original != "read" || tool.Description != "Read a file" {
		t.Fatalf("Tool(fs__read) = %+v, %v", tool, ok)
	}
	var obj map[string]any
	if err := json.Unmarshal(tool.Raw, &obj); err != nil || obj["name"] != "fs__read" || obj["inputSchema"] == nil {
		t.Errorf("exposed raw = %s", tool.Raw)
	}
	if tool, ok := c.Tool("search_issues"); !ok || &tool.Raw[0] != &c.Tools[1].Raw[0] {
		t.Errorf("unprefixed tool missing or copied")
	}
	if p, ok := c.Prompt("fs__summarize"); !ok || p.Original != "summarize" {
		t.Errorf("Prompt(fs__summarize) = %+v, %v", p, ok)
	}
	for uri, want := range map[string]string{"file:///etc/hosts": "fs", "file:///srv/x.txt": "fs", "file:///srv/a/b": ""} {
		got, _ := c.ResourceOwner(uri)
		if got != want {
			t.Errorf("ResourceOwner(%s) = %q, want %q", uri, got, want)
		}
	}
	if len(c.Conflicts) != 0 {
		t.Errorf("unexpected conflicts: %q", c.Conflicts)
	}
}

func TestCollisionLaterBackendLoses(t *testing.T) {
	c := Build([]Source{
		{Backend: "a", Lists: &backend.Lists{Tools: raws(`{"name":"x"}`), Resources: raws(`{"uri":"u:1"}`)}},
		{Backend: "b", Lists: &backend.Lists{Tools: raws(`{"name":"x"}`, `{"name":"y"}`), Resources: raws(`{"uri":"u:1"}`)}},
	})
	if tool, _ := c.Tool("x"); tool.Backend != "a" {
		t.Errorf("x owned by %q, want a", tool.Backend)
	}
	if _, ok := c.Tool("y"); !ok {
		t.Error("b's other tool lost")
	}
	if len(c.Conflicts) != 2 || !strings.Contains(c.Conflicts[1], `tool "x" of backend "b"`) || !strings.Contains(c.Conflicts[1], "tool_prefix") {
		t.Errorf("conflicts = %q", c.Conflicts)
	}
}

func TestExposedNameStaysWithinRules(t *testing.T) {
	long := strings.Repeat("n", 200)
	tests := map[string]string{
		"read":         "p__read",
		"with space/ü": "p__with_space__",
		long:           "",
	}
	for in, want := range tests {
		got := ExposedName("p__", in)
		if len(got) > MaxNameLen {
			t.Errorf("ExposedName(%q) is %d long", in, len(got))
		}
		if want != "" && got != want {
			t.Errorf("ExposedName(%q) = %q, want %q", in, got, want)
		}
	}
	if ExposedName("", long+"a") == ExposedName("", long+"b") {
		t.Error("shortened names collide")
	}
}

func TestDigestsFollowContent(t *testing.T) {
	a := Build([]Source{{Backend: "a", Lists: &backend.Lists{Tools: raws(`{"name":"x"}`)}}})
	b := Build([]Source{{Backend: "a", Lists: &backend.Lists{Tools: raws(`{"name":"x"}`)}}})
	c := Build([]Source{{Backend: "a", Lists: &backend.Lists{Tools: raws(`{"name":"x"}`, `{"name":"y"}`)}}})
	if a.ToolsDigest != b.ToolsDigest || a.ToolsDigest == c.ToolsDigest || a.PromptsDigest != c.PromptsDigest {
		t.Error("digests do not follow the lists")
	}
}

func TestClosest(t *testing.T) {
	c := Build([]Source{{Backend: "gh", Prefix: "gh__", Lists: &backend.Lists{Tools: raws(
		`{"name":"search_issues"}`, `{"name":"create_issue"}`, `{"name":"list_repos"}`)}}})
	tests := map[string]string{
		"search_issues":     "gh__search_issues", // forgot the prefix
		"gh__serch_issues":  "gh__search_issues", // typo
		"gh__create_issues": "gh__create_issue",
	}
	for in, want := range tests {
		if got := c.Closest(in, 3); len(got) == 0 || got[0] != want {
			t.Errorf("Closest(%q) = %q, want %q first", in, got, want)
		}
	}
	if got := c.Closest("zzzzzz", 3); len(got) != 0 {
		t.Errorf("Closest(zzzzzz) = %q, want none", got)
	}
}

// TestOverlappingTemplatesAreReported: a URI two backends' templates both
// match is read from the first backend; where their literal starts allow
// that, the catalog says so, and templates of one backend, or of distinct
// starts, are no conflict.
func TestOverlappingTemplatesAreReported(t *testing.T) {
	c := Build([]Source{
		{Backend: "aaa", Lists: &backend.Lists{Templates: raws(`{"uriTemplate":"x://{+rest}"}`, `{"uriTemplate":"x://own/{id}"}`)}},
		{Backend: "docs", Lists: &backend.Lists{Templates: raws(`{"uriTemplate":"x://docs/{path}"}`, `{"uriTemplate":"y://{id}"}`)}},
	})
	if owner, _ := c.ResourceOwner("x://docs/secret"); owner != "aaa" {
		t.Fatalf("x://docs/secret is read from %q", owner)
	}
	if len(c.Conflicts) != 1 || !strings.Contains(c.Conflicts[0], `"x://docs/{path}" of backend "docs" may match URIs of template "x://{+rest}" of backend "aaa"`) {
		t.Errorf("conflicts = %q; want one naming the overlap", c.Conflicts)
	}
}
