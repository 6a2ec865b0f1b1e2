package itest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
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
