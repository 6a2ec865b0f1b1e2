package splice

import "testing"

func TestField(t *testing.T) {
	line := `{"jsonrpc":"2.0", "method":"tools/call","params":{"id":7,"arguments":{"text":"a\"}b"}},"id" : 42}`
	cases := []struct {
		obj, key, want string
	}{
		{line, "id", "42"},
		{line, "method", `"tools/call"`},
		{line, "params", `{"id":7,"arguments":{"text":"a\"}b"}}`},
		{`{"params":{"id":7,"arguments":{"text":"a\"}b"}}}`, "text", ""},
		{`{"arguments":{"text":"a\"}b"}}`, "arguments", `{"text":"a\"}b"}`},
		{`{"text":"a\"}b"}`, "text", `"a\"}b"`},
		{`{"a":[1,{"b":"]"}],"b":null}`, "b", "null"},
		{`not json`, "id", ""},
	}
	for _, c := range cases {
		if got := string(Value([]byte(c.obj), c.key)); got != c.want {
			t.Errorf("Value(%s, %q) = %q, want %q", c.obj, c.key, got, c.want)
		}
	}
}

func TestReplace(t *testing.T) {
	got, ok := Replace(nil, []byte(`{"id":"abc","result":{"id":1}}`), "id", []byte("9"))
	if !ok || string(got) != `{"id":9,"result":{"id":1}}` {
		t.Errorf("Replace = %s, %v", got, ok)
	}
	if _, ok := Replace(nil, []byte(`{"method":"x"}`), "id", []byte("9")); ok {
		t.Error("Replace found an absent key")
	}
}
