package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// A backend's result for a 2026-07-28 client gets its members in the
// buffer the backend's line was read into, as the id is replaced: the
// same bytes decorate gives, and a large result is not copied.
func TestSpliceResultDecoratesInPlace(t *testing.T) {
	var m modernResult
	m.init("1.2")
	big := strings.Repeat("x", 1<<16)
	for _, c := range []struct {
		name, method, in string
		inPlace          bool
	}{
		{"call", "tools/call", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`, true},
		{"list", "tools/list", `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`, true},
		{"empty", "tools/call", `{"jsonrpc":"2.0","id":7,"result":{}}`, true},
		{"a 2026 backend's result", "tools/call", `{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}`, true},
		{"a backend's serverInfo replaced: a copy", "tools/call", `{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{}}}}`, false},
		{"serverInfo into an existing _meta: a copy", "tools/call", `{"jsonrpc":"2.0","id":7,"result":{"_meta":{"k":1},"content":[]}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := json.RawMessage(`"client-request-0001"`)
			want, _ := m.decorate(c.method, []byte(strings.Replace(c.in, `"id":7`, `"id":`+string(id), 1)))
			buf := append(make([]byte, jsonrpc.SpliceRoom), c.in...)
			resp, err := jsonrpc.ParseRoom(buf, jsonrpc.SpliceRoom)
			if err != nil {
				t.Fatal(err)
			}
			out, ok := m.spliceResult(c.method, resp, resp.Result, id)
			if ok != c.inPlace {
				t.Fatalf("in place: %v, want %v", ok, c.inPlace)
			}
			if !ok {
				return
			}
			if string(out) != string(want) {
				t.Errorf("got  %s\nwant %s", out, want)
			}
			if &out[len(out)-1] != &buf[len(buf)-1] {
				t.Error("the result was copied")
			}
		})
	}
}
