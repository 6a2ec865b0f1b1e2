package catalog

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// DecideTool decides once per key and tool of a snapshot, keeps the
// decisions of different keys apart, and decides a name the catalog does
// not have every time; a new snapshot decides again.
func TestDecideToolRemembersPerKeyAndSnapshot(t *testing.T) {
	src := []Source{{Backend: "gh", Prefix: "gh__", Lists: &backend.Lists{Tools: raws(`{"name":"search"}`, `{"name":"delete"}`)}}}
	c := Build(src)
	calls := map[string]int{}
	decider := func(key string, allow string) func(string) bool {
		return func(name string) bool {
			calls[key+" "+name]++
			return name == allow
		}
	}
	for range 3 {
		if !c.DecideTool("a", "gh__search", decider("a", "gh__search")) || c.DecideTool("a", "gh__delete", decider("a", "gh__search")) {
			t.Fatal("key a: wrong decision")
		}
		if c.DecideTool("b", "gh__search", decider("b", "gh__delete")) || !c.DecideTool("b", "gh__delete", decider("b", "gh__delete")) {
			t.Fatal("key b: wrong decision")
		}
		c.DecideTool("a", "gh__unknown", decider("a", ""))
	}
	for _, k := range []string{"a gh__search", "a gh__delete", "b gh__search", "b gh__delete"} {
		if calls[k] != 1 {
			t.Errorf("%s decided %d times, want once", k, calls[k])
		}
	}
	if calls["a gh__unknown"] != 3 {
		t.Errorf("a name the catalog lacks was decided %d times, want every time (3)", calls["a gh__unknown"])
	}
	Build(src).DecideTool("a", "gh__search", decider("a", "gh__search"))
	if calls["a gh__search"] != 2 {
		t.Error("a new snapshot did not decide again")
	}
}
