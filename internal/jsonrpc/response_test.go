package jsonrpc

import "testing"

func TestResponseError(t *testing.T) {
	tests := []struct{ msg, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{"isError":true,"error":{"code":1}}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m"}}`, `{"code":-32602,"message":"m"}`},
		{` { "error" : {"code":1} , "id":"x","jsonrpc":"2.0"}`, `{"code":1}`},
		{`{"id":"a\"result","error":null}`, `null`},
		{`{"jsonrpc":"2.0","method":"x"}`, ""},
		{`[1]`, ""},
		{`{"id":`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := string(ResponseError([]byte(tt.msg))); got != tt.want {
			t.Errorf("ResponseError(%s) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}
