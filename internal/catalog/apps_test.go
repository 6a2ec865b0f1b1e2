package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// appBackend is the lists of an MCP Apps server: a tool whose view is
// ui://forecast/view.html (in both ways _meta names it), that resource,
// and a template of views.
func appBackend(name, prefix, tool string) Source {
	return Source{Backend: name, Prefix: prefix, Lists: &backend.Lists{
		Tools:     raws(`{"name":"` + tool + `","inputSchema":{"type":"object"},"_meta":{"ui":{"resourceUri":"ui://forecast/view.html","visibility":["model","app"]},"ui/resourceUri":"ui://forecast/view.html"}}`),
		Resources: raws(`{"uri":"ui://forecast/view.html","name":"view","mimeType":"text/html;profile=mcp-app"}`, `{"uri":"file:///notes","name":"notes"}`),
		Templates: raws(`{"uriTemplate":"ui://forecast/{city}.html","name":"city"}`),
	}}
}

// Two backends serve the same ui:// URI: each one's is exposed with its
// prefix, in its resources, templates and tools' _meta alike, and each
// exposed URI leads to its backend under the backend's own URI. Other
// URIs and the rest of the bytes are as the backend sent them.
func TestAppViewsOfTwoBackends(t *testing.T) {
	c := Build([]Source{appBackend("a", "a__", "show"), appBackend("b", "b__", "show")})
	if len(c.Conflicts) != 1 || !strings.Contains(c.Conflicts[0], `resource "file:///notes" of backend "b" is hidden`) {
		t.Fatalf("conflicts %q; want only file:///notes's: the prefixes keep the views apart", c.Conflicts)
	}
	for _, b := range []string{"a", "b"} {
		tool, ok := c.Tool(b + "__show")
		if !ok {
			t.Fatalf("%s__show missing", b)
		}
		var obj struct {
			Meta struct {
				UI struct {
					ResourceURI string   `json:"resourceUri"`
					Visibility  []string `json:"visibility"`
				} `json:"ui"`
				Legacy string `json:"ui/resourceUri"`
			} `json:"_meta"`
		}
		want := "ui://" + b + "__forecast/view.html"
		if err := json.Unmarshal(tool.Raw, &obj); err != nil || obj.Meta.UI.ResourceURI != want || obj.Meta.Legacy != want || len(obj.Meta.UI.Visibility) != 2 {
			t.Errorf("%s's tool %s; want its view as %s in both members, the rest unchanged", b, tool.Raw, want)
		}
		owner, original, ok := c.BackendURI(want)
		if !ok || owner != b || original != "ui://forecast/view.html" {
			t.Errorf("BackendURI(%s) = %s, %s, %v; want %s's ui://forecast/view.html", want, owner, original, ok, b)
		}
		if got := c.ExposedURI(b, "ui://forecast/view.html"); got != want {
			t.Errorf("ExposedURI(%s) = %s, want %s", b, got, want)
		}
		owner, original, ok = c.BackendURI("ui://" + b + "__forecast/paris.html")
		if !ok || owner != b || original != "ui://forecast/paris.html" {
			t.Errorf("a templated view of %s: %s, %s, %v", b, owner, original, ok)
		}
	}
	var listed []string
	for _, r := range c.Resources {
		listed = append(listed, r.URI+"="+r.Original)
		if !strings.Contains(string(r.Raw), `"uri":"`+r.URI+`"`) {
			t.Errorf("resource %s listed as %s", r.URI, r.Raw)
		}
	}
	if got := strings.Join(listed, " "); got != "ui://a__forecast/view.html=ui://forecast/view.html file:///notes=file:///notes ui://b__forecast/view.html=ui://forecast/view.html" {
		t.Errorf("resources %s; want each view under its backend's prefix, file:///notes as is (taken by a)", got)
	}
}

// Without prefixes the second backend's view is taken: its resource and
// the tool that shows it are hidden, each with a conflict, rather than
// the tool shown with the first backend's view.
func TestAppViewCollisionWithoutPrefix(t *testing.T) {
	c := Build([]Source{appBackend("a", "", "show"), appBackend("b", "", "display")})
	if tool, ok := c.Tool("show"); !ok || tool.Backend != "a" {
		t.Fatalf("show = %+v; want a's", tool)
	}
	if _, ok := c.Tool("display"); ok {
		t.Error("b's tool display is served with a's view")
	}
	want := `tool "display" of backend "b" is hidden: its view ui://forecast/view.html is a resource of backend "a"`
	found := false
	for _, cf := range c.Conflicts {
		found = found || strings.Contains(cf, want)
	}
	if !found {
		t.Errorf("conflicts %q; want %q", c.Conflicts, want)
	}
	if owner, original, _ := c.BackendURI("ui://forecast/view.html"); owner != "a" || original != "ui://forecast/view.html" {
		t.Errorf("the view is %s's %s; want a's", owner, original)
	}
}
