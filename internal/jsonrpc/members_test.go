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

func TestWithoutMembers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"x","requestState":"s","inputResponses":{"a":{}},"arguments":{"k":1}}`, `{"name":"x","arguments":{"k":1}}`},
		{`{ "requestState" : "s" }`, `{}`},
		{`{"a":1, "b":[1,2]}`, `{"a":1, "b":[1,2]}`}, // none of them: as is
		{`{"inputResponses":{},"a":"requestState"}`, `{"a":"requestState"}`},
	} {
		got, err := WithoutMembers([]byte(tc.in), "requestState", "inputResponses")
		if err != nil || string(got) != tc.want {
			t.Errorf("WithoutMembers(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := WithoutMembers([]byte(`{"RequestState":"s"}`), "requestState"); err == nil {
		t.Error("a member in another case was dropped or kept without an error")
	}
}
