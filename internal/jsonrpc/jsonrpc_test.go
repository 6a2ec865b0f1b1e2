package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseKinds(t *testing.T) {
	tests := []struct {
		in                      string
		req, notif, resp, isErr bool
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, req: true},
		{in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, notif: true},
		{in: `{"jsonrpc":"2.0","id":"a","result":{}}`, resp: true},
		{in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, resp: true},
		{in: `{"jsonrpc":"2.0","id":1,"result":null}`, resp: true},
		{in: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, isErr: true},
		{in: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, isErr: true},
		{in: `{"jsonrpc":"2.0","id":1}`, isErr: true},
		{in: `not json`, isErr: true},
	}
	for _, tt := range tests {
		m, err := Parse([]byte(tt.in))
		if tt.isErr {
			if err == nil {
				t.Errorf("Parse(%s) succeeded, want error", tt.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%s): %v", tt.in, err)
			continue
		}
		if m.IsRequest() != tt.req || m.IsNotification() != tt.notif || m.IsResponse() != tt.resp {
			t.Errorf("Parse(%s): request=%v notification=%v response=%v", tt.in, m.IsRequest(), m.IsNotification(), m.IsResponse())
		}
	}
}

func TestParseErrorCodes(t *testing.T) {
	tests := []struct {
		in   string
		code int
	}{
		{`{`, CodeParseError},
		{``, CodeParseError},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"} x`, CodeParseError},
		{`{"jsonrpc":"2.0"}`, CodeInvalidRequest},
		// Valid JSON that is no message is an invalid request, not a
		// parse error.
		{`42`, CodeInvalidRequest},
		{` "ping" `, CodeInvalidRequest},
		{`null`, CodeInvalidRequest},
		{`true`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":5}`, CodeInvalidRequest},
		{`{"jsonrpc":2,"id":1,"method":"ping"}`, CodeInvalidRequest},
		// MCP forbids null request ids.
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, CodeInvalidRequest},
		// Params are structured, or absent.
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":5}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","method":"notifications/initialized","params":true}`, CodeInvalidRequest},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in))
		if err == nil || AsError(err).Code != tt.code {
			t.Errorf("Parse(%s) = %v, want code %d", tt.in, err, tt.code)
		}
	}
	// A null id stays valid where JSON-RPC needs it: in the error about a
	// message whose id could not be read.
	if m, err := Parse([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`)); err != nil || !m.IsResponse() {
		t.Errorf("error response with id null: %v", err)
	}
}

// Ids must come back byte for byte: no decoding, no re-encoding.
func TestIDsRoundTripByteExact(t *testing.T) {
	for _, id := range []string{`"caf\u00e9"`, `"a\"b\\c"`, `9007199254740993`, `-17`, `1.50`, `1e3`, `"😀"`} {
		m, err := Parse([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"x","params":{"a":1}}`))
		if err != nil {
			t.Fatalf("Parse id %s: %v", id, err)
		}
		out := AppendResult(nil, m.ID, json.RawMessage(`{}`))
		want := `{"jsonrpc":"2.0","id":` + id + `,"result":{}}`
		if string(out) != want {
			t.Errorf("id %s: got %s, want %s", id, out, want)
		}
	}
}

func TestAppendEncodesValidJSON(t *testing.T) {
	out := AppendRequest(nil, IntID(7), "tools/call", json.RawMessage(`{"name":"<a&b>"}`))
	if want := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"<a&b>"}}`; string(out) != want {
		t.Errorf("AppendRequest = %s, want %s", out, want)
	}
	out = AppendNotification(nil, "notifications/initialized", nil)
	if want := `{"jsonrpc":"2.0","method":"notifications/initialized"}`; string(out) != want {
		t.Errorf("AppendNotification = %s, want %s", out, want)
	}
	out = AppendError(nil, nil, &Error{Code: -32602, Message: "bad \"cursor\"\n", Data: json.RawMessage(`{"x":1}`)})
	var back struct {
		ID    any
		Error Error
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("AppendError produced invalid JSON %s: %v", out, err)
	}
	if back.ID != nil || back.Error.Code != -32602 || back.Error.Message != "bad \"cursor\"\n" || string(back.Error.Data) != `{"x":1}` {
		t.Errorf("AppendError round trip = %+v", back)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x01\x1f\t\r\n", "ünïcödé 😀", "<html>&"} {
		var got any
		if err := json.Unmarshal(AppendString(nil, s), &got); err != nil || got != s {
			t.Errorf("AppendString(%q) decodes to %q, %v", s, got, err)
		}
	}
}

func TestLookupAndReplace(t *testing.T) {
	params := []byte(`{ "name" : "gh__search", "arguments":{"q":"x","name":"inner"},
		"_meta": {"other":[1,{"progressToken":0}], "progressToken": "tok\"1"} }`)
	v, span, ok := Lookup(params, "name")
	if !ok || string(v) != `"gh__search"` {
		t.Fatalf("Lookup name = %s, %v", v, ok)
	}
	renamed := Replace(params, span, []byte(`"search"`))
	if v, _, _ := Lookup(renamed, "name"); string(v) != `"search"` {
		t.Errorf("after Replace name = %s", v)
	}
	tok, tspan, ok := LookupPath(renamed, "_meta", "progressToken")
	if !ok || string(tok) != `"tok\"1"` {
		t.Fatalf("LookupPath progressToken = %s, %v", tok, ok)
	}
	rewritten := Replace(renamed, tspan, []byte(`42`))
	var check map[string]any
	if err := json.Unmarshal(rewritten, &check); err != nil {
		t.Fatalf("rewritten params invalid: %v\n%s", err, rewritten)
	}
	if check["_meta"].(map[string]any)["progressToken"] != float64(42) || check["name"] != "search" {
		t.Errorf("rewritten = %s", rewritten)
	}
	if _, _, ok := Lookup([]byte(`{"a":1}`), "b"); ok {
		t.Error("Lookup found a missing key")
	}
	if _, _, ok := Lookup([]byte(`[1]`), "a"); ok {
		t.Error("Lookup found a key in an array")
	}
	if v, _, ok := Lookup([]byte(`{"\u005fmeta":{}}`), "_meta"); !ok || string(v) != `{}` {
		t.Error("Lookup missed an escaped key")
	}
}

func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,"}",{"c":null}]},"k":"v"}`), "k")
	f.Add([]byte(`{"_meta":{"progressToken":1}}`), "_meta")
	f.Fuzz(func(t *testing.T, doc []byte, key string) {
		v, span, ok := Lookup(doc, key)
		if !ok {
			return
		}
		if string(doc[span.Start:span.End]) != string(v) {
			t.Fatalf("span %v does not match value %q", span, v)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(doc, &m) == nil && !json.Valid(v) {
			t.Fatalf("valid document %q gave invalid value %q for %q", doc, v, key)
		}
	})
}

func TestCompact(t *testing.T) {
	in := json.RawMessage("{\n  \"a\": \"x y\",\r\n  \"b\": [1, 2]\n}")
	if got := string(Compact(in)); got != `{"a":"x y","b":[1,2]}` {
		t.Errorf("Compact = %s", got)
	}
	same := json.RawMessage(`{ "a": 1 }`)
	if got := Compact(same); &got[0] != &same[0] {
		t.Error("Compact copied a message without line breaks")
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := "first\r\n\n" + long + "\n" + strings.Repeat("y", 90) + "\nlast-no-newline"
	lr := NewLineReader(strings.NewReader(in), 100)
	var got []string
	for {
		line, err := lr.Next()
		var tl *ErrLineTooLong
		if errors.As(err, &tl) {
			got = append(got, "<too long>")
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	want := []string{"first", "<too long>", strings.Repeat("y", 90), "last-no-newline"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", got, want)
	}
}

func TestLineReaderLimitIsInclusive(t *testing.T) {
	lr := NewLineReader(bytes.NewReader([]byte("12345\n123456\n")), 5)
	if line, err := lr.Next(); err != nil || string(line) != "12345" {
		t.Errorf("line at limit: %q, %v", line, err)
	}
	if _, err := lr.Next(); err == nil {
		t.Error("line over limit accepted")
	}
}

func BenchmarkForwardRequest(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":"client-7","method":"tools/call","params":{"name":"gh__search","arguments":{"q":"` + strings.Repeat("z", 1024) + `"},"_meta":{"progressToken":"p1"}}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	buf := make([]byte, 0, 2048)
	for b.Loop() {
		m, err := Parse(line)
		if err != nil {
			b.Fatal(err)
		}
		_, span, _ := Lookup(m.Params, "name")
		params := Replace(m.Params, span, []byte(`"search"`))
		buf = AppendRequest(buf[:0], IntID(12345), m.Method, params)
	}
}

func TestLeadingID(t *testing.T) {
	tests := []struct {
		head string
		id   int64
		ok   bool
	}{
		{`{"jsonrpc":"2.0","id":42,"result":{"content":[{"text":"xxxx`, 42, true},
		{`{"id" : -7 ,"result":`, -7, true},
		{`{"jsonrpc":"2.0","result":{"id":3,"x":"`, 0, false},
		{`{"jsonrpc":"2.0","id":"abc","result":`, 0, false},
		{`{"jsonrpc":"2.0","id":12`, 0, false}, // the number may go on
		{`{"a":"\"id\":5","id":6,"result":1`, 6, true},
	}
	for _, tt := range tests {
		id, ok := LeadingID([]byte(tt.head))
		if id != tt.id || ok != tt.ok {
			t.Errorf("LeadingID(%s) = %d, %v; want %d, %v", tt.head, id, ok, tt.id, tt.ok)
		}
	}
}

func TestLineReaderKeepsHeadOfLongLine(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":9,"result":"` + strings.Repeat("x", 1000) + `"}`
	_, err := NewLineReader(strings.NewReader(line+"\n"), 100).Next()
	var tl *ErrLineTooLong
	if !errors.As(err, &tl) {
		t.Fatalf("err = %v", err)
	}
	if id, ok := LeadingID(tl.Head); !ok || id != 9 {
		t.Errorf("LeadingID(head %q) = %d, %v", tl.Head, id, ok)
	}
}

// The one-pass envelope parser must accept exactly what encoding/json
// accepts, and find the same members.
func FuzzParseAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[1,2.5e-3,"\u00e9\n"]}}`,
		`{"jsonrpc":"2.0","id":"a","result":null}`, `{"JSONRPC":"2.0","Id":2,"method":null,"params":[]}`,
		`{"id":1,"id":2}`, `{"a":01}`, `{"a":"\x01"}`, `{"a":tru}`, `[1]`, ` {} `, `{"a":1}x`, `{"a":-}`,
		`{"method":5}`, `{"a":"\ud800"}`, `{"a":1.}`, `{"a":{"b":[{}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got Message
		wantErr := json.Unmarshal(data, &want)
		gotErr := parseEnvelope(data, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: encoding/json says %v, parseEnvelope says %v", data, wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		if want.JSONRPC != got.JSONRPC || want.Method != got.Method || string(want.ID) != string(got.ID) ||
			string(want.Params) != string(got.Params) || string(want.Result) != string(got.Result) || string(want.Error) != string(got.Error) {
			t.Fatalf("%q: encoding/json %+v, parseEnvelope %+v", data, want, got)
		}
	})
}

func BenchmarkParseResponse(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` + strings.Repeat("z", 1024) + `"}],"structuredContent":{"text":"` + strings.Repeat("z", 1024) + `"}}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := Parse(line); err != nil {
			b.Fatal(err)
		}
	}
}

func TestParseHead(t *testing.T) {
	tests := []struct {
		head     string
		id       string
		response bool
		request  bool
	}{
		{`{"jsonrpc":"2.0","id":42,"result":{"content":[{"text":"xxxx`, "42", true, false},
		{`{"id" : -7 ,"error":`, "-7", true, false},
		{`{"jsonrpc":"2.0","id":"a,b","result":`, `"a,b"`, true, false},
		{`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"x":"`, "1", false, true},
		{`{"jsonrpc":"2.0","method":"x","id":1,"result":`, "1", false, true}, // not a valid response
		{`{"jsonrpc":"2.0","id":1,"params":{"x":"`, "1", false, true},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":`, "", false, true},
		{`{"jsonrpc":"2.0","result":{"id":3,"x":"`, "", true, false},
		{`{"jsonrpc":"2.0","id":12`, "", false, false}, // the number may go on
		{`{"a":"\"id\":5","id":6,"result":1`, "6", true, false},
		{`[{"id":1,"result":`, "", false, false},
	}
	for _, tt := range tests {
		h := ParseHead([]byte(tt.head))
		if string(h.ID) != tt.id || h.Response != tt.response || h.Request != tt.request {
			t.Errorf("ParseHead(%s) = id %s, response %v, request %v; want %s, %v, %v", tt.head, h.ID, h.Response, h.Request, tt.id, tt.response, tt.request)
		}
	}
}

// TestValidStringFindsEverySpecialByte puts a quote, a backslash escape or
// a control character at every offset of a string longer than a word, so
// that indexControl's word-at-a-time scan meets it in each lane.
func TestValidStringFindsEverySpecialByte(t *testing.T) {
	for _, c := range []struct {
		insert string
		ok     bool
	}{{`\"`, true}, {`\\`, true}, {`\u00e9`, true}, {"é", true}, {"\x7f", true}, {"\x1f", false}, {"\n", false}, {"\x00", false}, {`\x`, false}} {
		for at := 0; at <= 20; at++ {
			body := strings.Repeat("a", at) + c.insert + strings.Repeat("b", 20-at)
			line := []byte(`{"jsonrpc":"2.0","id":1,"result":"` + body + `"}`)
			_, err := Parse(line)
			var v any
			want := json.Unmarshal(line, &v) == nil
			if (err == nil) != c.ok || c.ok != want {
				t.Errorf("%q at %d: Parse error %v, want ok=%v (encoding/json ok=%v)", c.insert, at, err, c.ok, want)
			}
		}
	}
}
