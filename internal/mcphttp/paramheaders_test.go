package mcphttp

import (
	"reflect"
	"sort"
	"testing"
)

// x-mcp-header annotations count only where 2026-07-28 allows them
// (reachable through "properties" alone), and a call mirrors each
// annotated argument that has a value, in its string form.
func TestMirroredParams(t *testing.T) {
	tool := []byte(`{"name":"t","inputSchema":{"type":"object","properties":{` +
		`"region":{"type":"string","x-mcp-header":"Region"},` +
		`"n":{"type":"integer","x-mcp-header":"N"},` +
		`"flag":{"type":"boolean","x-mcp-header":"Flag"},` +
		`"where":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},` +
		`"list":{"type":"array","items":{"type":"string","x-mcp-header":"Item"}},` +
		`"empty":{"type":"string","x-mcp-header":""}}}}`)
	annotated := ParamHeaders(tool)
	var names []string
	for _, p := range annotated {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if want := []string{"Flag", "N", "Region", "Zone"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("annotations %v, want %v", names, want)
	}
	got := MirroredParams([]byte(`{"name":"t","arguments":{"region":"eu","n":-7,"flag":false,"where":{"zone":null},"list":["a"]}}`), annotated)
	sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
	if want := []Param{{"Flag", "false"}, {"N", "-7"}, {"Region", "eu"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("mirrored %v, want %v", got, want)
	}
	if ParamHeaders([]byte(`{"name":"plain","inputSchema":{"type":"object"}}`)) != nil {
		t.Error("a tool without annotations has some")
	}
}
