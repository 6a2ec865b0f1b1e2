package gateway

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Allocation budget of checkDecided: refusing ambiguous members costs a
// tools/call one pass over params and no allocation.
func TestCheckDecidedAllocationBudget(t *testing.T) {
	params := json.RawMessage(`{"name":"fs__read_file","arguments":{"path":"/srv/data/` + strings.Repeat("x", 200) +
		`"},"_meta":{"progressToken":17}}`)
	const budget = 0
	got := testing.AllocsPerRun(100, func() {
		if err := checkDecided("tools/call", params, true); err != nil {
			t.Fatal(err)
		}
	})
	if got > budget {
		t.Errorf("checkDecided allocates %.1f times, over its budget of %d", got, budget)
	}
}

// policy20 is a shared host's client policy: 20 tool rules.
func policy20() *access.Policy {
	var rules []string
	for i := range 19 {
		rules = append(rules, fmt.Sprintf("team%d__*", i))
	}
	return access.NewPolicy(append(rules, "!*__delete_*"), []string{"*"}, []string{"*"})
}

// catalog20 is a catalog of 100 tools of 20 backends.
func catalog20() *catalog.Catalog {
	var src []catalog.Source
	for i := range 20 {
		var tools []json.RawMessage
		for j := range 5 {
			tools = append(tools, json.RawMessage(fmt.Sprintf(`{"name":"tool_%d"}`, j)))
		}
		src = append(src, catalog.Source{Backend: fmt.Sprintf("team%02d", i), Prefix: fmt.Sprintf("team%d__", i), Lists: &backend.Lists{Tools: tools}})
	}
	return catalog.Build(src)
}

// Deciding whether a client with a 20-rule policy may call a tool
// allocates nothing.
func TestAllowsToolAllocationBudget(t *testing.T) {
	s := &Session{}
	s.client.Store(&access.Client{Name: "c", Policy: policy20()})
	cat := catalog20()
	if !s.allowsTool(cat, "team7__tool_3") || s.allowsTool(cat, "team19__tool_0") {
		t.Fatal("wrong decisions")
	}
	if got := testing.AllocsPerRun(100, func() { s.allowsTool(cat, "team7__tool_3") }); got > 0 {
		t.Errorf("allowsTool allocates %.1f times, over its budget of 0", got)
	}
}

// BenchmarkAllowsTool is the policy check of a tools/call of a client with
// 20 rules: remembered per catalog snapshot, against walking the rules.
func BenchmarkAllowsTool(b *testing.B) {
	s := &Session{}
	p := policy20()
	s.client.Store(&access.Client{Name: "c", Policy: p})
	cat := catalog20()
	b.Run("remembered", func(b *testing.B) {
		for b.Loop() {
			s.allowsTool(cat, "team17__tool_3")
		}
	})
	b.Run("rules", func(b *testing.B) {
		for b.Loop() {
			p.Allows(access.Tools, "team17__tool_3")
		}
	})
}

// forwarded finds in one pass what LookupPath and a name lookup found in
// two, and nothing where they find nothing.
func TestForwardedAgreesWithLookups(t *testing.T) {
	for _, params := range []string{
		`{"name":"echo","arguments":{"a":1},"_meta":{"progressToken":"p-1"}}`,
		`{"_meta":{"x":1,"progressToken":17},"name":"echo"}`,
		`{"name":"echo"}`,
		`{"name":7,"_meta":{}}`,
		`{"_meta":{"progressToken":1,"progressToken":2},"name":"x"}`,
		`{"name":"a","name":"b","_meta":{"progressToken":3}}`, // a repeated name does not hide the token
		`[1,2]`,
	} {
		f := forwarded(json.RawMessage(params))
		wantName, _, _ := stringParam(json.RawMessage(params), "name")
		wantTok, wantSpan, wantOK := jsonrpc.LookupPath(json.RawMessage(params), "_meta", "progressToken")
		if f.name != wantName || f.hasToken != wantOK || string(f.token) != string(wantTok) || f.tokenSpan != wantSpan {
			t.Errorf("forwarded(%s) = %q, %s, %v, %v; want %q, %s, %v, %v", params, f.name, f.token, f.tokenSpan, f.hasToken, wantName, wantTok, wantSpan, wantOK)
		}
	}
}

// toolCallParams reads in one pass what checkDecided, stringParam and
// forwarded read in three, and what it read still holds for the params
// with the tool renamed, the token before or after the name.
func TestToolCallParamsAgreesWithThreePasses(t *testing.T) {
	for _, params := range []string{
		`{"name":"echo","arguments":{"a":1},"_meta":{"progressToken":"p-1"}}`,
		`{"_meta":{"x":1,"progressToken":17},"name":"echo","arguments":{}}`,
		`{"name":"echo"}`,
		`{"name":7,"_meta":{}}`,
		`{"_meta":{"progressToken":1,"progressToken":2},"name":"x"}`,
		`{"name":"a","name":"b","_meta":{"progressToken":3}}`,
		`{"name":"a","Arguments":{}}`,
		`{"arguments":{"name":"inner"}}`,
		`{"name":"a","arguments":{},"arguments":{}}`,
		`{"arguments":1,"Arguments":2,"name":"x","name":"y"}`,
		`{"name":"x","name":"y","arguments":1,"arguments":2}`,
		`[1,2]`,
		``,
	} {
		raw := json.RawMessage(params)
		name, span, f, err := toolCallParams(raw, nil)
		headAgrees(t, raw)
		decidedErr := checkDecided("tools/call", raw, true)
		wantName, wantSpan, nameErr := stringParam(raw, "name")
		switch {
		case decidedErr != nil:
			if err == nil || err.Error() != decidedErr.Error() {
				t.Errorf("toolCallParams(%s) error %v, want checkDecided's %v", params, err, decidedErr)
			}
			continue
		case nameErr != nil:
			if err == nil || err.Error() != nameErr.Error() {
				t.Errorf("toolCallParams(%s) error %v, want stringParam's %v", params, err, nameErr)
			}
			continue
		case err != nil:
			t.Errorf("toolCallParams(%s): %v", params, err)
			continue
		}
		if want := forwarded(raw); name != wantName || span != wantSpan || !f.of(raw) ||
			f.name != want.name || f.hasToken != want.hasToken || string(f.token) != string(want.token) || f.tokenSpan != want.tokenSpan {
			t.Errorf("toolCallParams(%s) = %q, %v, %+v; want %q, %v, %+v", params, name, span, f, wantName, wantSpan, want)
		}
		for _, original := range []string{name, "x", "a_much_longer_name_at_the_backend"} {
			renamedParams := renamed(raw, span, name, original)
			got, want := f.renamed(renamedParams, span, original), forwarded(renamedParams)
			if !got.of(renamedParams) || got.name != want.name || got.hasToken != want.hasToken || string(got.token) != string(want.token) || got.tokenSpan != want.tokenSpan {
				t.Errorf("renamed to %q, toolCallParams(%s) gives %+v; forwarded of the renamed params %+v", original, params, got, want)
			}
		}
	}
}

// headAgrees checks that toolCallParams reads what the front's scan of
// params found (ScanHead) as it reads params itself: a stateless
// tools/call is routed, checked and forwarded by the same name, token
// and refusals as a session's.
func headAgrees(t *testing.T, params json.RawMessage) {
	t.Helper()
	h := ScanHead(params)
	if h.Err != nil {
		return // refused by the front, before routing
	}
	name, span, f, err := toolCallParams(params, nil)
	hName, hSpan, hf, hErr := toolCallParams(params, &h)
	if fmt.Sprint(err) != fmt.Sprint(hErr) || name != hName || span != hSpan || !reflect.DeepEqual(f, hf) {
		t.Errorf("toolCallParams(%s) with the head = %q, %v, %+v, %v; without = %q, %v, %+v, %v",
			params, hName, hSpan, hf, hErr, name, span, f, err)
	}
}
