package itest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// statelessBody is an MCP 2026-07-28 request: params holds the members
// besides _meta.
func statelessBody(id int, method, params string) string {
	if params != "" {
		params = "," + params
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}%s}}`, id, method, params)
}

// statelessHeaders are a 2026-07-28 request's headers, with a client's
// bearer token.
func statelessHeaders(token, method, name string) []string {
	h := []string{"Authorization", "Bearer " + token, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

// statelessResult decodes a plain JSON answer.
func statelessResult(t *testing.T, body string) (result map[string]any, errMsg string) {
	t.Helper()
	var m struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not a JSON-RPC response: %v: %s", err, body)
	}
	if m.Error != nil {
		return nil, m.Error.Message
	}
	return m.Result, ""
}

// TestStatelessUnderAccessControl: a stateless request takes the path a
// session's does: the client's policy hides and refuses (journaled), its
// calls are audited, its rate_limit counts, and a composite runs its
// steps as the caller.
func TestStatelessUnderAccessControl(t *testing.T) {
	d, _ := accessGateway(t)

	resp, body := exchange(t, http.DefaultClient, d.URL, statelessBody(1, "tools/list", ""), statelessHeaders(narrowToken, "tools/list", "")...)
	result, errMsg := statelessResult(t, body)
	if resp.StatusCode != 200 || errMsg != "" {
		t.Fatalf("narrow tools/list: HTTP %d %s", resp.StatusCode, body)
	}
	names := map[string]bool{}
	for _, tool := range result["tools"].([]any) {
		names[tool.(map[string]any)["name"].(string)] = true
	}
	if !names["a__alpha"] || names["b__beta"] || names["b__echo"] {
		t.Errorf("narrow's stateless tools/list: %v; want a's tools and none of b's", names)
	}

	// A hidden tool does not exist for narrow, and the refusal is journaled.
	resp, body = exchange(t, http.DefaultClient, d.URL, statelessBody(2, "tools/call", `"name":"b__echo","arguments":{"text":"x"}`), statelessHeaders(narrowToken, "tools/call", "b__echo")...)
	if _, errMsg = statelessResult(t, body); resp.StatusCode != 200 || !strings.Contains(errMsg, `unknown tool "b__echo"`) {
		t.Errorf("narrow calling b__echo statelessly: HTTP %d %s; want the unknown-tool error", resp.StatusCode, body)
	}
	d.Stderr.Await(t, 10*time.Second, "the journaled policy refusal of the stateless call", func(out string) bool {
		return strings.Contains(out, `refused client \"narrow\": tools/call b__echo`)
	})

	// Its call is audited as a session's is.
	resp, body = exchange(t, http.DefaultClient, d.URL, statelessBody(3, "tools/call", `"name":"a__echo","arguments":{"text":"stateless-audit"}`), statelessHeaders(narrowToken, "tools/call", "a__echo")...)
	if result, errMsg = statelessResult(t, body); resp.StatusCode != 200 || errMsg != "" || result["resultType"] != "complete" {
		t.Fatalf("narrow calling a__echo: HTTP %d %s", resp.StatusCode, body)
	}
	d.Stderr.Await(t, 10*time.Second, "the audit entry of the stateless call", func(out string) bool {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "message_id=af84f9ba2bdf44638ea8e737adfb73ba") && strings.Contains(line, "client=narrow") && strings.Contains(line, "tool=a__echo") {
				return true
			}
		}
		return false
	})

	// A composite runs its steps as its caller.
	call := statelessBody(4, "tools/call", `"name":"composite__via_b"`)
	_, body = exchange(t, http.DefaultClient, d.URL, call, statelessHeaders(fullToken, "tools/call", "composite__via_b")...)
	if result, errMsg = statelessResult(t, body); errMsg != "" || result["isError"] == true || !strings.Contains(fmt.Sprint(result["content"]), "through b") {
		t.Errorf("full calling composite__via_b statelessly: %s; want b's answer", body)
	}
	_, body = exchange(t, http.DefaultClient, d.URL, call, statelessHeaders(narrowToken, "tools/call", "composite__via_b")...)
	if result, _ = statelessResult(t, body); result["isError"] != true || !strings.Contains(fmt.Sprint(result["content"]), `unknown tool "b__echo"`) {
		t.Errorf("narrow calling composite__via_b statelessly: %s; want the step refused", body)
	}

	// rate_limit 3/1h counts stateless requests as any other.
	list := statelessBody(5, "tools/list", "")
	for i := 1; i <= 3; i++ {
		if resp, body := exchange(t, http.DefaultClient, d.URL, list, statelessHeaders(cappedToken, "tools/list", "")...); resp.StatusCode != 200 {
			t.Fatalf("capped's stateless request %d: HTTP %d %s, want 200 within rate_limit 3/1h", i, resp.StatusCode, body)
		}
	}
	resp, body = exchange(t, http.DefaultClient, d.URL, list, statelessHeaders(cappedToken, "tools/list", "")...)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "rate_limit") {
		t.Errorf("capped's fourth stateless request: HTTP %d Retry-After %q %s; want 429 naming rate_limit", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// A stateless call to a backend with an instance per session gets an
// instance of its own for the call, released when the call ends: two
// stateless calls never share a process's state.
func TestStatelessCallOfAPooledBackend(t *testing.T) {
	d := lifecycleGateway(t, t.TempDir(), pooledBackend)
	testutil.Eventually(t, 30*time.Second, "the pool's idle instance", func() bool { return len(children(d)) == 1 })
	pids := map[int]bool{}
	for i := range 2 {
		resp, body := exchange(t, http.DefaultClient, d.URL, statelessBody(i, "tools/call", `"name":"ded__pid"`),
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "ded__pid")
		result, errMsg := statelessResult(t, body)
		if resp.StatusCode != 200 || errMsg != "" {
			t.Fatalf("stateless call %d: HTTP %d %s", i, resp.StatusCode, body)
		}
		pid, count := counter(t, result["structuredContent"])
		if count != 1 || pids[pid] {
			t.Errorf("stateless call %d: pid %d count %d; want a fresh instance", i, pid, count)
		}
		pids[pid] = true
	}
}

// A real, published server behind the gateway, used by a stateless
// client in raw HTTP: discover, list, call, progress on the response
// stream, and a resource read by the Mcp-Name its URI gives.
func TestStatelessWithServerEverything(t *testing.T) {
	bin := testutil.NpmServer(t, "mcp-server-everything")
	d := gateway(t, fmt.Sprintf("[backends.everything]\ncommand = %q\nargs = [\"stdio\"]\n", bin))
	post := func(id int, method, name, params string, more ...string) (*http.Response, string) {
		t.Helper()
		h := append([]string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method}, more...)
		if name != "" {
			h = append(h, "Mcp-Name", name)
		}
		return exchange(t, http.DefaultClient, d.URL, statelessBody(id, method, params), h...)
	}
	_, body := post(1, "server/discover", "", "")
	if result, errMsg := statelessResult(t, body); errMsg != "" || result["instructions"] == nil || result["capabilities"].(map[string]any)["tools"] == nil {
		t.Errorf("server/discover: %s", body)
	}
	_, body = post(2, "tools/list", "", "")
	if result, _ := statelessResult(t, body); !strings.Contains(body, `"name":"everything__echo"`) || result["cacheScope"] != "private" || result["resultType"] != "complete" {
		t.Errorf("tools/list: %.300s", body)
	}
	_, body = post(3, "tools/call", "everything__echo", `"name":"everything__echo","arguments":{"message":"hello statelessly"}`)
	if result, _ := statelessResult(t, body); !strings.Contains(fmt.Sprint(result["content"]), "hello statelessly") || result["resultType"] != "complete" {
		t.Errorf("everything__echo: %s", body)
	}

	progress := strings.Replace(statelessBody(4, "tools/call", `"name":"everything__trigger-long-running-operation","arguments":{"duration":0.2,"steps":2}`),
		`"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"tok"`, 1)
	resp, body := exchange(t, http.DefaultClient, d.URL, progress, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "everything__trigger-long-running-operation")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || strings.Count(body, `"method":"notifications/progress"`) != 2 ||
		strings.Contains(body, "\nid:") || !strings.Contains(body, "Long running operation completed") {
		t.Errorf("long-running operation: %s %s", resp.Header.Get("Content-Type"), body)
	}

	_, body = post(5, "resources/list", "", "")
	var list struct {
		Result struct {
			Resources []struct{ URI string } `json:"resources"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Result.Resources) == 0 {
		t.Fatalf("resources/list: %v %.300s", err, body)
	}
	uri := list.Result.Resources[0].URI
	_, body = post(6, "resources/read", uri, fmt.Sprintf(`"uri":%q`, uri))
	if result, errMsg := statelessResult(t, body); errMsg != "" || result["contents"] == nil || result["ttlMs"] == nil {
		t.Errorf("resources/read %s: %.300s", uri, body)
	}
}

// server/discover answers per client: what a client's policy hides of a
// backend (here all of b) adds nothing to its capabilities or
// instructions.
func TestStatelessDiscoverPerClient(t *testing.T) {
	bins := testutil.Build(t)
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.a]
command = %[1]q
args = ["--instructions", "instructions of a"]

[backends.b]
command = %[1]q
args = ["--resources", "1", "--prompts", "--instructions", "instructions of b"]

[clients.full]
token_sha256 = %[2]q

[clients.narrow]
token_sha256 = %[3]q
tools = ["a__*"]
prompts = []
resources = []
`, bins.Fake, sha256Hex(fullToken), sha256Hex(narrowToken)), testutil.ConfigOptions{Auth: "required"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	discover := func(token string) map[string]any {
		t.Helper()
		_, body := exchange(t, http.DefaultClient, d.URL, statelessBody(1, "server/discover", ""), statelessHeaders(token, "server/discover", "")...)
		result, errMsg := statelessResult(t, body)
		if errMsg != "" {
			t.Fatalf("server/discover: %s", body)
		}
		return result
	}
	full, narrow := discover(fullToken), discover(narrowToken)
	fullCaps, narrowCaps := full["capabilities"].(map[string]any), narrow["capabilities"].(map[string]any)
	if fullCaps["resources"] == nil || fullCaps["prompts"] == nil || !strings.Contains(fmt.Sprint(full["instructions"]), "instructions of b") {
		t.Errorf("full's discover: %v", full)
	}
	if narrowCaps["tools"] == nil || narrowCaps["resources"] != nil || narrowCaps["prompts"] != nil ||
		strings.Contains(fmt.Sprint(narrow["instructions"]), "instructions of b") || !strings.Contains(fmt.Sprint(narrow["instructions"]), "instructions of a") {
		t.Errorf("narrow's discover: %v; want a's tools and instructions only", narrow)
	}
	// A 2025 session's initialize, too, has the instructions of the
	// backends its client may see only. Before, it had every backend's.
	for token, want := range map[string]bool{fullToken: true, narrowToken: false} {
		_, body := exchange(t, tokenClient(token), d.URL, initializeBody)
		if got := strings.Contains(body, "instructions of b"); got != want || !strings.Contains(body, "instructions of a") {
			t.Errorf("initialize with the token of %s: %s; want b's instructions: %v", map[bool]string{true: "full", false: "narrow"}[want], body, want)
		}
	}
}

// TestStatelessCompositeSteps: a composite called by a stateless request
// runs its steps as its own requests: a step calling a tool whose
// arguments are mirrored in Mcp-Param-* headers is not checked against
// the outer call's headers, and a step whose backend asks the client for
// input fails at once with why, instead of waiting out
// client_request_timeout. Before, the steps took the outer request's
// headers and requestState.
func TestStatelessCompositeSteps(t *testing.T) {
	bins := testutil.Build(t)
	tools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(tools, []byte(`[{"name":"route","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.fake]
command = %[1]q
args = ["--tools-file", %[2]q]

[composites.routed]
steps = [{ tool = "fake__route", arguments = { region = "eu" } }]

[composites.asking]
steps = [{ tool = "fake__sample" }]
`, bins.Fake, tools), testutil.ConfigOptions{})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	call := func(name string) (map[string]any, string) {
		t.Helper()
		body := strings.Replace(statelessBody(1, "tools/call", `"name":"`+name+`","arguments":{}`),
			`"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`, 1)
		_, raw := exchange(t, http.DefaultClient, d.URL, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name)
		return statelessResult(t, raw)
	}
	if res, errMsg := call("composite__routed"); errMsg != "" || res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "route ok") {
		t.Errorf("a composite whose step has a mirrored argument: %v %s; want the step's result", res, errMsg)
	}
	res, errMsg := call("composite__asking")
	if res["resultType"] == "input_required" || (errMsg == "" && res["isError"] != true) || !strings.Contains(fmt.Sprint(res)+errMsg, "cannot ask the client") {
		t.Errorf("a composite whose step asks the client: %v %s; want an error saying it cannot", res, errMsg)
	}
}
