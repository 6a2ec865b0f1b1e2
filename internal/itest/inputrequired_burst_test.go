package itest

import (
	"strings"
	"testing"
)

// TestInputRequiredBurstInOneResult: requests a backend sends for one
// call together (here in one write) reach the client in one
// InputRequiredResult, as a 2026 server would ask for them, and one retry
// answers them all.
func TestInputRequiredBurstInOneResult(t *testing.T) {
	gw := inputGateway(t)
	args := `{"requests":[` +
		`{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}},` +
		`{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}},` +
		`{"method":"roots/list"}]}`
	caps := `{"sampling":{},"elicitation":{},"roots":{}}`
	a := gw.call(t, aliceToken, 1, "fake__requests", args, caps, "")
	keys := mustInputRequired(t, a, "elicitation/create", "sampling/createMessage", "roots/list")
	answers := map[string]string{
		keys["elicitation/create"]:     `{"action":"accept","content":{"name":"alice"}}`,
		keys["sampling/createMessage"]: `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}`,
		keys["roots/list"]:             `{"roots":[{"uri":"file:///home/alice"}]}`,
	}
	b := gw.call(t, aliceToken, 2, "fake__requests", args, caps, retryParams(answers, a.Result.RequestState))
	content := string(b.Result.StructuredContent)
	if b.Error != nil || b.Result.ResultType != "complete" || !containsAll(content, "alice", "sampled", "file:///home/alice") {
		t.Errorf("retry: HTTP %d %s; want the call's result with the three answers", b.status, b.raw)
	}
	if strings.Count(content, `"result"`) != 3 {
		t.Errorf("answers %s; want three results", content)
	}
}
