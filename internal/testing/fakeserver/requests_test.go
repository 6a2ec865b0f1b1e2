package main

import (
	"testing"
)

// TestRequestsAllInFlight checks that requests sends every request before
// it has any answer, and answers with each answer in the order of the
// requests, whatever order they came in.
func TestRequestsAllInFlight(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	id := p.request("tools/call", `{"name":"requests","arguments":{"requests":[{"method":"sampling/createMessage","params":{"maxTokens":1}},{"method":"roots/list"}]}}`)
	first, second := p.next(), p.next()
	if first.Method != "sampling/createMessage" || string(first.Params) != `{"maxTokens":1}` || second.Method != "roots/list" {
		t.Fatalf("server sent %+v and %+v, want sampling/createMessage then roots/list", first, second)
	}
	p.send(`{"jsonrpc":"2.0","id":` + string(second.ID) + `,"error":{"code":-1,"message":"no"}}`)
	p.send(`{"jsonrpc":"2.0","id":` + string(first.ID) + `,"result":{"model":"m"}}`)
	m, _ := p.response(id)
	out := decodeTool(t, m.Result)
	if got, want := string(out.StructuredContent["answers"]), `[{"result":{"model":"m"}},{"error":{"code":-1,"message":"no"}}]`; got != want {
		t.Errorf("answers %s, want %s", got, want)
	}
}
