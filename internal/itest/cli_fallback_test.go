package itest

import (
	"encoding/json"
	"strings"
	"testing"
)

// cliEcho is a cli backend with an echo tool, the same unprefixed name as
// the fake server's.
const cliEcho = `
[backends.sh]
transport = "cli"

[backends.sh.tools.echo]
command = ["echo", "cli: {{text}}"]
input_schema = { type = "object", properties = { text = { type = "string" } } }
`

// A cli backend named as a fallback serves the call of a primary that died
// before answering: the daemon runs its program (it once sent the call on
// the cli backend's connection, which it has not, and crashed).
func TestCLIBackendServesAsFallback(t *testing.T) {
	d := gateway(t, `
[backends.a]
command = "FAKE"
args = ["--crash-after", "0"]
fallback = ["sh"]
max_restarts = 0
`+cliEcho)
	c := newRawClient(t, d.URL)
	a := lastAnswer(t, c.post(t, callBody(1, "a__echo", `{"text":"via sh"}`)))
	if a.Error != nil {
		t.Fatalf("call whose backend died before answering: %+v; want it served by the cli fallback", a.Error)
	}
	var res struct {
		Meta    map[string]any `json:"_meta"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(a.Result, &res); err != nil || res.Meta["io.mcpgate/servedBy"] != "sh" ||
		len(res.Content) != 1 || strings.TrimSpace(res.Content[0].Text) != "cli: via sh" {
		t.Fatalf("result %s; want the cli program's output and _meta io.mcpgate/servedBy = sh", a.Result)
	}
	// The daemon is alive and serves the next call.
	if a := lastAnswer(t, c.post(t, callBody(2, "sh__echo", `{"text":"still here"}`))); a.Error != nil {
		t.Fatalf("next call: %+v", a.Error)
	}
}

// A method the gateway does not know goes to the only backend, if there is
// one; a cli backend answers nothing but its tools, so it is never that
// backend (the daemon once forwarded such a request on its missing
// connection and crashed).
func TestUnknownMethodNeverGoesToACLIBackend(t *testing.T) {
	d := gateway(t, cliEcho)
	c := newRawClient(t, d.URL)
	a := lastAnswer(t, c.post(t, `{"jsonrpc":"2.0","id":1,"method":"vendor/extension","params":{}}`))
	if a.Error == nil || a.Error.Code != -32601 {
		t.Fatalf("answer %+v; want method not found (-32601)", a)
	}
	if a := lastAnswer(t, c.post(t, callBody(2, "sh__echo", `{"text":"still here"}`))); a.Error != nil {
		t.Fatalf("next call: %+v", a.Error)
	}
}
