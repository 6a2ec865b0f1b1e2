package gateway

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// servers are the ways the servers behind the gateway read an object:
// JavaScript and Python keep the last member of a name, exactly spelled
// (a map here); Go's encoding/json keeps the last one spelled in any case.
var servers = []struct {
	name string
	read func(obj []byte, key string) (json.RawMessage, bool)
}{
	{"exact, last wins", func(obj []byte, key string) (json.RawMessage, bool) {
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			return nil, false
		}
		v, ok := m[key]
		return v, ok
	}},
	{"encoding/json", func(obj []byte, key string) (json.RawMessage, bool) {
		var v struct {
			Name          json.RawMessage `json:"name"`
			URI           json.RawMessage `json:"uri"`
			Meta          json.RawMessage `json:"_meta"`
			ProgressToken json.RawMessage `json:"progressToken"`
			Ref           json.RawMessage `json:"ref"`
			Type          json.RawMessage `json:"type"`
		}
		if json.Unmarshal(obj, &v) != nil {
			return nil, false
		}
		r := map[string]json.RawMessage{"name": v.Name, "uri": v.URI, "_meta": v.Meta, "progressToken": v.ProgressToken, "ref": v.Ref, "type": v.Type}[key]
		return r, r != nil
	}},
}

// decision is what the gateway read of a request to route, check and
// audit it, and the params it forwards.
type decision struct {
	name, uri, refType string // as the policy and the audit saw them
	token              string // the progress token forwarded in place of the client's
	forwarded          json.RawMessage
}

// decide reads msg as HandleRequest and sendAdmitted do, with the helpers
// they use, for the methods that route by a member; a tool or prompt's
// name at its backend is the exposed one with "orig_" in front.
func decide(msg *jsonrpc.Message) (*decision, error) {
	if err := checkDecided(msg.Method, msg.Params, true); err != nil {
		return nil, err
	}
	d := &decision{forwarded: msg.Params}
	switch msg.Method {
	case "tools/call", "prompts/get":
		name, span, err := stringParam(msg.Params, "name")
		if err != nil {
			return nil, err
		}
		d.name, d.forwarded = name, renamed(msg.Params, span, name, "orig_"+name)
	case "resources/read", "resources/subscribe":
		uri, _, err := stringParam(msg.Params, "uri")
		if err != nil {
			return nil, err
		}
		d.uri = uri
	case "completion/complete":
		ref, refSpan, ok := jsonrpc.Lookup(msg.Params, "ref")
		if !ok {
			return nil, errors.New("no ref")
		}
		d.refType, _, _ = stringParam(ref, "type")
		switch d.refType {
		case "ref/prompt":
			name, span, err := stringParam(ref, "name")
			if err != nil {
				return nil, err
			}
			d.name, d.forwarded = name, jsonrpc.Replace(msg.Params, refSpan, renamed(ref, span, name, "orig_"+name))
		case "ref/resource":
			uri, _, err := stringParam(ref, "uri")
			if err != nil {
				return nil, err
			}
			d.uri = uri
		default:
			return nil, errors.New("bad ref type")
		}
	default:
		return nil, errors.New("not routed by a member")
	}
	if _, span, ok := jsonrpc.LookupPath(d.forwarded, "_meta", "progressToken"); ok {
		d.token = "424242" // as newToken makes them
		d.forwarded = jsonrpc.Replace(d.forwarded, span, []byte(d.token))
	}
	return d, nil
}

// FuzzDecidedIsForwarded is the differential test of defect 1 of issue
// 21: for any message, what the gateway routes, checks and audits by is
// what a server reads from the bytes forwarded to it, whichever way its
// parser reads objects; or the message is refused as an invalid request.
// Inputs that are not a message are taken as a recipe for params full of
// repeated, nested and case-variant members (genParams).
func FuzzDecidedIsForwarded(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"py__read","name":"delete_everything"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"py__read","Name":"delete_everything"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"na\u006de":"py__read","arguments":{"name":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1,"progressToken":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1},"_meta":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progreſſToken":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///ok","uri":"file:///etc/shadow"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///ok","URI":"file:///x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p","name":"q"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"ref":{"type":"ref/resource","uri":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"},"params":{"name":"q"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","Method":"tools/call","params":{"name":"p"}}`,
		"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", "\x02\x05\x11\x05\x12\x08\x30",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			data = genMessage(data)
		}
		msg, err := jsonrpc.Parse(data)
		if err != nil {
			return // refused before routing
		}
		checkDecided(msg.Method, msg.Params, false) // as for a notification: it must not panic
		if msg.Method == "tools/call" {
			headAgrees(t, msg.Params) // the same as a stateless request
		}
		d, err := decide(msg)
		if err != nil {
			var e *jsonrpc.Error
			if errors.As(err, &e) && e.Code == jsonrpc.CodeInvalidRequest && !strings.Contains(e.Message, "invalid request: ") {
				t.Fatalf("refusal %q does not say the request is invalid", e.Message)
			}
			return
		}
		// The envelope is rebuilt from what Parse read.
		out := jsonrpc.AppendRequest(nil, json.RawMessage("7"), msg.Method, d.forwarded)
		var env struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(out, &env); err != nil || env.Method != msg.Method {
			t.Fatalf("forwarded %s: method %q, want %q (%v)", out, env.Method, msg.Method, err)
		}
		for _, srv := range servers {
			want := func(obj []byte, key, decided string, raw bool) {
				v, ok := srv.read(obj, key)
				got := string(v)
				if !raw {
					got, _ = jsonrpc.StringValue(v)
				}
				if !ok || got != decided {
					t.Fatalf("%s\n the gateway decided %s = %q, a server (%s) reads %s from %s", data, key, decided, srv.name, v, obj)
				}
			}
			params := env.Params
			if msg.Method == "completion/complete" {
				params, _ = srv.read(params, "ref")
				want(params, "type", d.refType, false)
			}
			if d.name != "" {
				want(params, "name", "orig_"+d.name, false)
			}
			if d.uri != "" {
				want(params, "uri", d.uri, false)
			}
			if meta, ok := srv.read(env.Params, "_meta"); ok {
				if tok, ok := srv.read(meta, "progressToken"); ok && string(tok) != d.token {
					t.Fatalf("%s\n forwarded progress token %s, the gateway's is %q", data, tok, d.token)
				}
			}
		}
	})
}

// genMessage builds a request from a recipe: its first byte picks the
// method, the others the members of params, some of them nested objects.
func genMessage(recipe []byte) []byte {
	methods := []string{"tools/call", "prompts/get", "resources/read", "resources/subscribe", "completion/complete"}
	method := methods[0]
	if len(recipe) > 0 {
		method, recipe = methods[int(recipe[0])%len(methods)], recipe[1:]
	}
	out := jsonrpc.AppendRequest(nil, json.RawMessage("1"), method, genObject(&recipe, 0))
	return out
}

var (
	genKeys = []string{`"name"`, `"Name"`, `"NAME"`, `"na\u006de"`, `"uri"`, `"Uri"`, `"_meta"`, `"_Meta"`, `"progressToken"`,
		`"progreſſToken"`, `"ref"`, `"type"`, `"arguments"`, `"cursor"`, `"name "`, `"\u212aind"`}
	genValues = []string{`"py__read"`, `"secret__delete"`, `"file:///ok"`, `"file:///etc/shadow"`, `"ref/prompt"`, `"ref/resource"`,
		`1`, `"tok"`, `null`, `"py\u005f_read"`, `"PY__READ"`, `[]`}
)

func genObject(recipe *[]byte, depth int) []byte {
	out := []byte{'{'}
	for n := 0; len(*recipe) >= 2; n++ {
		k, v := (*recipe)[0], (*recipe)[1]
		*recipe = (*recipe)[2:]
		if k == 0xff {
			break // end of this object
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, genKeys[int(k)%len(genKeys)]...)
		out = append(out, ':')
		if v >= 0xe0 && depth < 3 {
			out = append(out, genObject(recipe, depth+1)...)
		} else {
			out = append(out, genValues[int(v)%len(genValues)]...)
		}
	}
	return append(out, '}')
}

func TestCheckDecided(t *testing.T) {
	tests := []struct {
		method, params string
		request        bool
		ambiguous      bool
	}{
		{"notifications/initialized", `{}`, false, false},
		{"notifications/other", `{"a":1,"a":2}`, false, false},
		{"notifications/cancelled", `{"requestId":1,"requestId":2}`, false, true},
		{"notifications/cancelled", `{"requestId":1,"reason":"a","Reason":"b"}`, false, true},
		{"vendor/method", `{"_meta":{"progressToken":1,"progressToken":2}}`, true, true},
		{"vendor/method", `{"a":1,"a":2}`, true, false},
		{"ping", `{}`, true, false},
		{"tools/call", `{"name":"a","arguments":{"x":1,"x":2}}`, true, false},
		{"tools/call", `{"name":"a","arguments":{},"arguments":{}}`, true, true},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"a"},"_meta":{"progressToken":1}}`, true, false},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"a"},"_meta":{"progressToken":1,"progressToken":1}}`, true, true},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"a","uri":"u","URI":"v"}}`, true, true},
		{"tools/list", `{"cursor":"a"}`, true, false},
		{"tools/list", `[1,2]`, true, false},
	}
	for _, tt := range tests {
		err := checkDecided(tt.method, json.RawMessage(tt.params), tt.request)
		var e *jsonrpc.Error
		if (err != nil) != tt.ambiguous || err != nil && (!errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidRequest) {
			t.Errorf("checkDecided(%s, %s, request %v) = %v, want ambiguous %v", tt.method, tt.params, tt.request, err, tt.ambiguous)
		}
	}
}

// BenchmarkCheckDecided is what refusing ambiguous members costs a
// tools/call: one pass over params per member the gateway decides on.
func BenchmarkCheckDecided(b *testing.B) {
	params := json.RawMessage(`{"name":"fs__read_file","arguments":{"path":"/srv/data/` + strings.Repeat("x", 200) +
		`","encoding":"utf-8","options":{"follow":true,"max":1048576}},"_meta":{"progressToken":17}}`)
	b.SetBytes(int64(len(params)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkDecided("tools/call", params, true); err != nil {
			b.Fatal(err)
		}
	}
}
