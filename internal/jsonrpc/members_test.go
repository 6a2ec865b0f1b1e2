package jsonrpc

import "testing"

// Members are added or set without touching the bytes of the others.
func TestSetMember(t *testing.T) {
	for _, tc := range []struct{ in, key, value, want string }{
		{``, "a", `1`, `{"a":1}`},
		{`null`, "a", `1`, `{"a":1}`},
		{`{}`, "a", `1`, `{"a":1}`},
		{` { } `, "a", `1`, ` {"a":1 } `},
		{`{"b" : [1, 2]}`, "a", `1`, `{"a":1,"b" : [1, 2]}`},
		{`{"b":2, "a" : "old"}`, "a", `"new"`, `{"b":2, "a" : "new"}`},
	} {
		got, err := SetMember([]byte(tc.in), tc.key, []byte(tc.value))
		if err != nil || string(got) != tc.want {
			t.Errorf("SetMember(%s, %s, %s) = %s, %v; want %s", tc.in, tc.key, tc.value, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":1,"A":2}`} {
		if got, err := SetMember([]byte(bad), "a", []byte(`1`)); err == nil {
			t.Errorf("SetMember(%s) = %s; want an error", bad, got)
		}
	}
}

func TestAppendWithout(t *testing.T) {
	keys := []string{"a", "b"}
	for _, tc := range []struct {
		in, want string
		dropped  int
	}{
		{`{}`, `{}`, 0},
		{`{"a":1}`, `{}`, 1},
		{` {"a" : 1 , "c" : [1, "}"] } `, ` {"c" : [1, "}"]} `, 1},
		{`{"c":1,"a":{"x":2},"d":"e","b":true}`, `{"c":1,"d":"e"}`, 2},
		{`{"a":1,"a":2,"c":3}`, `{"c":3}`, 2},
		{`{"A":1,"\u0061":2}`, `{"A":1}`, 1}, // another case stays; an escape of "a" is "a"
		{`[1]`, `[1]`, 0},
		{`{"a":`, `{"a":`, 0},
	} {
		got, n := AppendWithout([]byte("x"), []byte(tc.in), keys)
		if string(got) != "x"+tc.want || n != tc.dropped {
			t.Errorf("AppendWithout(%s) = %s, %d; want %s, %d", tc.in, got[1:], n, tc.want, tc.dropped)
		}
	}
}

func TestAppendRequestWithout(t *testing.T) {
	params := []byte(`{"name":"x","_meta":{"a":1,"p":"t","b":2},"arguments":{}}`)
	meta, span, _ := Lookup(params, "_meta")
	if string(meta) != `{"a":1,"p":"t","b":2}` {
		t.Fatalf("meta %s", meta)
	}
	got := AppendRequestWithout(nil, []byte("7"), "tools/call", params, span, []string{"a", "b"})
	want := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"p":"t"},"arguments":{}}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
