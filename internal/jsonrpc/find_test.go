package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	tests := []struct {
		doc, key  string
		want      string // the value found, "" for none
		ambiguous bool
	}{
		{`{"name":"a","arguments":{}}`, "name", `"a"`, false},
		{`{"arguments":{"name":"x"}}`, "name", "", false},
		{`{"name":"a","name":"b"}`, "name", "", true},
		{`{"name":"a","arguments":{},"name":"b"}`, "name", "", true},
		{`{"name":"a","Name":"b"}`, "name", "", true},
		{`{"NAME":"b"}`, "name", "", true},
		{`{"na\u006de":"a","name":"b"}`, "name", "", true},
		{`{"na\u006de":"a"}`, "name", `"a"`, false},
		{`{"progressToken":1,"progreſſToken":2}`, "progressToken", "", true}, // ſ folds to s in encoding/json
		{`{"\u212aey":1}`, "key", "", true},                                  // the Kelvin sign folds to k
		{`{"uri":"a","url":"b","urI":"c"}`, "uri", "", true},
		{`{"uri":"a","url":"b"}`, "uri", `"a"`, false},
		{`{"nameX":1,"xname":2,"name":3}`, "name", `3`, false},
		{`[{"name":1}]`, "name", "", false},
		{`"name"`, "name", "", false},
		{`{}`, "name", "", false},
	}
	for _, tt := range tests {
		v, span, err := Find([]byte(tt.doc), tt.key)
		var amb *AmbiguousError
		if got := errors.As(err, &amb); got != tt.ambiguous || (err != nil && !got) {
			t.Errorf("Find(%s, %q) error = %v, want ambiguous %v", tt.doc, tt.key, err, tt.ambiguous)
			continue
		}
		if string(v) != tt.want {
			t.Errorf("Find(%s, %q) = %s, want %s", tt.doc, tt.key, v, tt.want)
		}
		if v != nil && tt.doc[span.Start:span.End] != string(v) {
			t.Errorf("Find(%s, %q): span %v is not the value", tt.doc, tt.key, span)
		}
		if _, _, ok := Lookup([]byte(tt.doc), tt.key); ok != (tt.want != "") {
			t.Errorf("Lookup(%s, %q) ok = %v", tt.doc, tt.key, ok)
		}
	}
}

func TestFindPath(t *testing.T) {
	tests := []struct {
		doc       string
		want      string
		ambiguous bool
	}{
		{`{"_meta":{"progressToken":1}}`, `1`, false},
		{`{"_meta":{"progressToken":1},"_meta":{"progressToken":2}}`, "", true},
		{`{"_meta":{"progressToken":1,"progressToken":2}}`, "", true},
		{`{"_meta":{"progressToken":1},"_META":{}}`, "", true},
		{`{"_meta":{"other":{"progressToken":1}}}`, "", false},
		{`{"x":{"_meta":{"progressToken":1}},"_meta":{"progressToken":2}}`, `2`, false},
	}
	for _, tt := range tests {
		v, span, err := FindPath([]byte(tt.doc), "_meta", "progressToken")
		var amb *AmbiguousError
		if errors.As(err, &amb) != tt.ambiguous || string(v) != tt.want {
			t.Errorf("FindPath(%s) = %s, %v; want %s, ambiguous %v", tt.doc, v, err, tt.want, tt.ambiguous)
		}
		if v != nil && tt.doc[span.Start:span.End] != string(v) {
			t.Errorf("FindPath(%s): span %v is not the value", tt.doc, span)
		}
	}
}

// TestParseRefusesRepeatedMembers: the envelope is what a message is routed
// by; a repeated member of it, in any case, makes the message invalid.
func TestParseRefusesRepeatedMembers(t *testing.T) {
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{},"PARAMS":{"name":"y"}}`,
		`{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`,
	} {
		_, err := Parse([]byte(msg))
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidRequest || !strings.Contains(e.Message, "more than once") {
			t.Errorf("Parse(%s) = %v, want an invalid request naming the repeated member", msg, err)
		}
	}
	if _, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1,"a":2}}`)); err != nil {
		t.Errorf("Parse refused repeated members inside params, which it does not read: %v", err)
	}
}

// findKeys are the member names FuzzFind compares parsers on: what the
// gateway looks up, and nothing whose case folds in surprising ways.
var findKeys = []string{"name", "uri", "_meta", "progressToken", "cursor", "ref", "type", "id", "level", "requestId"}

// FuzzFind checks Find against encoding/json, the parser of Go servers
// (last member wins, names match in any case), and against a map, as
// JavaScript and Python read objects (last member wins, exact names): a
// value Find returns is what each of them reads, and a member Find calls
// missing none of them reads. Find may call a member ambiguous where they
// happen to agree (a member repeated with the same value): that is refused
// too.
func FuzzFind(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","name":"b"}`, `{"name":"a","Name":"b"}`, `{"na\u006de":"a","x":1}`, `{"ProgressToken":1}`,
		`{"uri":"a","arguments":{"uri":"b"}}`, `{"progreſſToken":1,"progressToken":2}`, `{"\u212Aey":1}`,
		`{"cursor":null,"cursor":"x"}`, `{"ref":{"type":"ref/prompt","name":"p"}}`, `{}`, `[]`, `{"name":"a"}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, doc []byte, k uint8) {
		key := findKeys[int(k)%len(findKeys)]
		v, span, err := Find(doc, key)
		var exact map[string]json.RawMessage
		if json.Unmarshal(doc, &exact) != nil {
			return // not an object: Find's answer is not compared
		}
		folded := reflect.New(reflect.StructOf([]reflect.StructField{{
			Name: "V", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:"` + key + `"`),
		}}))
		if err := json.Unmarshal(doc, folded.Interface()); err != nil {
			t.Fatalf("encoding/json read %q as a map but not as a struct: %v", doc, err)
		}
		goValue := folded.Elem().Field(0).Bytes()
		mapValue, inMap := exact[key]
		switch {
		case err != nil:
			var amb *AmbiguousError
			if !errors.As(err, &amb) {
				t.Fatalf("Find(%q, %q) on valid JSON: %v", doc, key, err)
			}
		case v == nil:
			if inMap || goValue != nil {
				t.Fatalf("Find(%q, %q) found nothing; a map reads %s, encoding/json %s", doc, key, mapValue, goValue)
			}
		default:
			if !bytes.Equal(v, mapValue) || !bytes.Equal(v, goValue) {
				t.Fatalf("Find(%q, %q) = %s; a map reads %s, encoding/json %s", doc, key, v, mapValue, goValue)
			}
			if string(doc[span.Start:span.End]) != string(v) {
				t.Fatalf("Find(%q, %q): span %v is not the value", doc, key, span)
			}
		}
	})
}

func BenchmarkLookupToolCall(b *testing.B) {
	params := []byte(`{"name":"fs__read_file","arguments":{"path":"/srv/data/` + strings.Repeat("x", 200) +
		`","encoding":"utf-8","options":{"follow":true,"max":1048576}},"_meta":{"progressToken":17}}`)
	b.SetBytes(int64(len(params)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := Lookup(params, "name"); !ok {
			b.Fatal("no name")
		}
		if _, _, ok := LookupPath(params, "_meta", "progressToken"); !ok {
			b.Fatal("no token")
		}
	}
}

func TestFindEach(t *testing.T) {
	keys := []string{"name", "arguments", "_meta"}
	values := make([]json.RawMessage, len(keys))
	if err := FindEach([]byte(`{"_meta":{"a":1},"name":"n","x":[]}`), keys, values); err != nil ||
		string(values[0]) != `"n"` || values[1] != nil || string(values[2]) != `{"a":1}` {
		t.Errorf("FindEach = %q, %v", values, err)
	}
	for _, doc := range []string{`{"name":1,"_meta":{},"name":2}`, `{"arguments":{},"Arguments":{}}`, `{"_META":{}}`} {
		var amb *AmbiguousError
		if err := FindEach([]byte(doc), keys, values); !errors.As(err, &amb) {
			t.Errorf("FindEach(%s) = %v, want an ambiguity", doc, err)
		}
	}
}

// TestPlainASCII checks the word-at-a-time plainASCII against the byte it
// refuses at every place of names up to three words long, and against
// the bytes around those it refuses.
func TestPlainASCII(t *testing.T) {
	for n := range 25 {
		name := bytes.Repeat([]byte{'a'}, n)
		if !plainASCII(name) {
			t.Fatalf("%q is plain ASCII", name)
		}
		for i := range n {
			for _, c := range []byte{'\\', 0x80, 0xc3, 0xff, '[', ']', 0x7f, 0x5b, 0x5d, 0x1c, 0xdc} {
				b := bytes.Clone(name)
				b[i] = c
				want := c != '\\' && c < 0x80
				if got := plainASCII(b); got != want {
					t.Errorf("plainASCII(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
}
