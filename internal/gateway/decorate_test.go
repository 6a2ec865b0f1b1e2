package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

func TestDecorateSplicesWithoutReencoding(t *testing.T) {
	var m modernResult
	m.init("1.2")
	info := `"io.modelcontextprotocol/serverInfo":{"name":"mcpgate","title":"mcpgate","version":"1.2"}`
	cases := []struct {
		name, method, in, want string
		code                   int
	}{
		{"call result", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{"content":[],"x":1.50}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + info + `},"content":[],"x":1.50}}`, 0},
		{"empty result", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{ }}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + info + `} }}`, 0},
		{"list gets caching hints", "tools/list",
			`{"jsonrpc":"2.0","id":"a","result":{"tools":[]}}`,
			`{"jsonrpc":"2.0","id":"a","result":{"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{` + info + `},"tools":[]}}`, 0},
		{"existing _meta keeps its members", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":1},"content":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + info + `,"k":1},"content":[]}}`, 0},
		{"empty _meta", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{},"content":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + info + `},"content":[]}}`, 0},
		{"a 2026 backend's members stay, its serverInfo gives way to mcpgate's", "resources/read",
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","ttlMs":5,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"context7","version":"4.1.1"}}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{` + info + `},"resultType":"input_required","ttlMs":5,"cacheScope":"public"}}`, 0},
		{"a backend's serverInfo beside other _meta", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"s"}},"content":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{` + info + `,"k":1},"content":[]}}`, 0},
		{"resource not found is -32602", "resources/read",
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"nope"}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"nope"}}`, -32602},
		{"other errors stay", "tools/call",
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`, -32601},
		{"a result that is no object", "x/y",
			`{"jsonrpc":"2.0","id":1,"result":[1]}`,
			`{"jsonrpc":"2.0","id":1,"result":[1]}`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, code := m.decorate(c.method, []byte(c.in))
			if string(got) != c.want || code != c.code {
				t.Errorf("decorate(%s)\n got %s (code %d)\nwant %s (code %d)", c.in, got, code, c.want, c.code)
			}
			if !json.Valid(got) {
				t.Errorf("not JSON: %s", got)
			}
		})
	}
}

// FuzzDecorate: whatever result a backend sent, the decorated response is
// JSON if the response was, and a result object gets resultType unless a
// member it would add is ambiguous there (then it is left as it is).
func FuzzDecorate(f *testing.F) {
	f.Add("tools/list", []byte(`{"tools":[]}`))
	f.Add("tools/call", []byte(`{"_meta":{"a":1}, "content" : [ ] }`))
	f.Add("resources/read", []byte(`{ }`))
	f.Add("tools/call", []byte(`"x"`))
	var m modernResult
	m.init("v")
	f.Fuzz(func(t *testing.T, method string, result []byte) {
		if !json.Valid(result) {
			return
		}
		in := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), result...), '}')
		out, _ := m.decorate(method, in)
		if !json.Valid(out) {
			t.Fatalf("decorate(%s) = %s: not JSON", in, out)
		}
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		var obj map[string]json.RawMessage
		var have [4]json.RawMessage
		ambiguous := jsonrpc.FindEach(result, decoratedKeys, have[:]) != nil // left as it is
		if json.Unmarshal(result, &obj) == nil && obj != nil && !ambiguous {
			var got map[string]json.RawMessage
			if err := json.Unmarshal(resp.Result, &got); err != nil || got["resultType"] == nil {
				t.Fatalf("decorate(%s) = %s: no resultType", in, out)
			}
		}
	})
}

func BenchmarkDecorate(b *testing.B) {
	var m modernResult
	m.init("1.0")
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + string(make([]byte, 0)) + `hello"}],"structuredContent":{"text":"hello"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		m.decorate("tools/call", resp)
	}
}

// list_ttl is the ttlMs of lists and server/discover, the least of the
// enabled backends'; resources/read stays immediately stale.
func TestListTTL(t *testing.T) {
	cfg := &config.Config{Backends: map[string]*config.Backend{
		"a":   {Name: "a", Enabled: true, Protocol: config.Protocol{ListTTL: 5 * time.Minute}},
		"b":   {Name: "b", Enabled: true, Protocol: config.Protocol{ListTTL: 90 * time.Second}},
		"off": {Name: "off", Enabled: false},
	}}
	if got := listTTL(cfg); got != 90000 {
		t.Errorf("listTTL = %d, want 90000, the least of the enabled backends", got)
	}
	cfg.Backends["c"] = &config.Backend{Name: "c", Enabled: true}
	if got := listTTL(cfg); got != 0 {
		t.Errorf("listTTL with a backend without list_ttl = %d, want 0", got)
	}
	var m modernResult
	m.init("1")
	m.listTTL.Store(90000)
	for method, want := range map[string]string{"tools/list": `"ttlMs":90000`, "server/discover": `"ttlMs":90000`, "resources/read": `"ttlMs":0`} {
		out, _ := m.decorate(method, []byte(`{"jsonrpc":"2.0","id":1,"result":{"x":[]}}`))
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: %s, want %s", method, out, want)
		}
	}
}
