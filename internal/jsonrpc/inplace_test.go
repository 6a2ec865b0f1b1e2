package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// SpliceResult answers a response under the client's id in the buffer it
// was read into, keeping the result's bytes where they are, whatever the
// order of the members and the lengths of the ids; it refuses what a copy
// would have to rewrite.
func TestSpliceResult(t *testing.T) {
	result := `{"content":[{"type":"text","text":"hi"}]}`
	tests := []struct {
		line, id string
		ok       bool
	}{
		{`{"jsonrpc":"2.0","id":12,"result":` + result + `}`, `34`, true},
		{`{"jsonrpc":"2.0","id":12,"result":` + result + `}`, `"5f0c2a9e-5b7e-4c1e-9d8a-0a1b2c3d4e5f"`, true},
		{`{"jsonrpc":"2.0","id":123456,"result":` + result + `}`, `1`, true},
		{`{"result":` + result + `, "id" : 7,"jsonrpc":"2.0"}`, `"x"`, true},
		{`{"jsonrpc":"2.0","id":1,"result":` + result + `}`, `"` + strings.Repeat("a", SpliceRoom) + `"`, false}, // no room
		{`{"jsonrpc":"2.0","ID":1,"result":` + result + `}`, `2`, false},                                         // another spelling
		{`{"jsonrpc":"2.0","id":1,"result":` + result + `,"x":1}`, `2`, false},                                   // an unknown member
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`, `2`, false},
	}
	for _, tt := range tests {
		buf := append(make([]byte, SpliceRoom), tt.line...)
		m, err := ParseRoom(buf, SpliceRoom)
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		res := m.Result
		out, ok := SpliceResult(m, m.Result, []byte(tt.id))
		if ok != tt.ok {
			t.Errorf("SpliceResult(%s, %s) ok = %v, want %v", tt.line, tt.id, ok, tt.ok)
			continue
		}
		if !ok {
			if string(buf[SpliceRoom:]) != tt.line {
				t.Errorf("SpliceResult(%s) refused but changed the line to %s", tt.line, buf[SpliceRoom:])
			}
			continue
		}
		resp, err := Parse(out)
		if err != nil || string(resp.ID) != tt.id || string(resp.Result) != result || resp.JSONRPC != "2.0" {
			t.Errorf("SpliceResult(%s, %s) = %s (%v)", tt.line, tt.id, out, err)
		}
		if tt.line[1] == 'j' && &resp.Result[0] != &res[0] {
			t.Errorf("SpliceResult(%s) moved the result", tt.line)
		}
	}
	// A result something rewrote is not the message's.
	m, _ := ParseRoom(append(make([]byte, SpliceRoom), `{"jsonrpc":"2.0","id":1,"result":{}}`...), SpliceRoom)
	if _, ok := SpliceResult(m, bytes.Clone(m.Result), []byte("2")); ok {
		t.Error("SpliceResult took a result that is not the message's")
	}
	// Parse alone leaves no room.
	m, _ = Parse([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	if _, ok := SpliceResult(m, m.Result, []byte("2")); ok {
		t.Error("SpliceResult rewrote a message parsed without room")
	}
}

func TestSpliceResultInsert(t *testing.T) {
	for _, c := range []struct {
		name, line, id, insert, want string
		at                           int
	}{
		{"longer id", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, `"client-17"`, `"resultType":"complete",`,
			`{"jsonrpc":"2.0","id":"client-17","result":{"resultType":"complete","content":[]}}`, 1},
		{"shorter id", `{"jsonrpc":"2.0","id":123456,"result":{"a":1}}`, `1`, `"b":2,`,
			`{"jsonrpc":"2.0","id":1,"result":{"b":2,"a":1}}`, 1},
		{"shorter id, short insert", `{"jsonrpc":"2.0","id":123456789,"result":{"a":1}}`, `1`, `"b":2,`,
			`{"jsonrpc":"2.0","id":1,"result":{"b":2,"a":1}}`, 1},
		{"result first", `{"result":{"a":1},"jsonrpc":"2.0","id":5}`, `6`, `"b":2,`, "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			buf := append(make([]byte, SpliceRoom), c.line...)
			m, err := ParseRoom(buf, SpliceRoom)
			if err != nil {
				t.Fatal(err)
			}
			out, ok := SpliceResultInsert(m, m.Result, json.RawMessage(c.id), c.at, []byte(c.insert))
			if c.want == "" {
				if ok {
					t.Fatalf("spliced %s", out)
				}
				return
			}
			if !ok || string(out) != c.want {
				t.Fatalf("got %s, %v; want %s", out, ok, c.want)
			}
		})
	}
	// Not enough room: refused, m untouched.
	buf := append(make([]byte, 4), `{"jsonrpc":"2.0","id":1,"result":{}}`...)
	m, _ := ParseRoom(buf, 4)
	if _, ok := SpliceResultInsert(m, m.Result, json.RawMessage(`2`), 1, []byte(`"resultType":"complete"`)); ok {
		t.Error("spliced without room")
	}
}
