package itest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// found returns the names find_tools returned for query, and fails the
// test unless each came with its full definition.
func found(t *testing.T, cs *mcp.ClientSession, query string, limit int) []string {
	t.Helper()
	res := testutil.MustCallTool(t, cs, "find_tools", map[string]any{"query": query, "limit": limit})
	return foundIn(t, testutil.ToolText(res))
}

func foundIn(t *testing.T, text string) []string {
	t.Helper()
	if strings.HasPrefix(text, "No tool matches") {
		return nil
	}
	var out struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("find_tools answered %q: %v", text, err)
	}
	var names []string
	for _, tool := range out.Tools {
		if tool.InputSchema == nil || tool.Description == "" {
			t.Errorf("find_tools returned %s without its definition", tool.Name)
		}
		names = append(names, tool.Name)
	}
	return names
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// auditOf returns the fields of the audit entries in out that name tool,
// without what differs between two calls (time, session, sizes).
func auditOf(out, client, tool string) []string {
	var entries []string
	keep := regexp.MustCompile(`\b(client|backend|tool|method|outcome)=("[^"]*"|\S+)`)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "message_id=af84f9ba2bdf44638ea8e737adfb73ba") && strings.Contains(line, "client="+client+" ") && strings.Contains(line, "tool="+tool+" ") {
			entries = append(entries, strings.Join(keep.FindAllString(line, -1), " "))
		}
	}
	return entries
}

// TestSearchMode: a profile in search mode lists the meta-tools only;
// find_tools finds what the client may use with full definitions;
// call_tool answers with the tool's own result and is audited as a direct
// call, and what the policy hides is refused with the same error and the
// same journal entry as a direct call; add_tools puts found tools in the
// session's list with list_changed, up to max_added_tools; a backend that
// leaves leaves the results, with list_changed.
func TestSearchMode(t *testing.T) {
	d := profileGateway(t, "")
	find := strings.TrimSuffix(d.URL, "/mcp") + "/mcp/find"
	events := testutil.NewClientEvents("full")
	full := testutil.ConnectHTTP(t, find, tokenClient(fullToken), events.ClientOptions())
	narrow := testutil.ConnectHTTP(t, find, tokenClient(narrowToken), nil)

	ctx := testutil.Context(t, 30*time.Second)
	list, err := full.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tool := range list.Tools {
		listed = append(listed, tool.Name)
		if other := map[string]string{"find_tools": "call_tool"}[tool.Name]; !strings.Contains(tool.Description, cmp.Or(other, "find_tools")) {
			t.Errorf("%s's description does not say how it goes with the other meta-tools: %q", tool.Name, tool.Description)
		}
	}
	if fmt.Sprint(listed) != "[find_tools call_tool add_tools]" {
		t.Fatalf("tools/list in search mode = %v; want the three meta-tools", listed)
	}
	if !strings.Contains(list.Tools[0].Description, "a (") || !strings.Contains(list.Tools[0].Description, "c (") {
		t.Errorf("find_tools does not say what it finds among: %q", list.Tools[0].Description)
	}

	if got := found(t, full, "return the text I give you", 5); !contains(got, "a__echo") || !contains(got, "b__echo") {
		t.Errorf("find_tools for echoing = %v; want a__echo and b__echo", got)
	}
	if got := found(t, narrow, "return the text I give you", 20); contains(got, "a__echo") || !contains(got, "b__echo") {
		t.Errorf("narrow's find_tools = %v; want b__echo and never a__echo, which its policy hides", got)
	}

	// call_tool: the tool's own result, audited as the direct call is.
	direct := testutil.MustCallTool(t, full, "a__echo", map[string]any{"text": "same answer"})
	via := testutil.MustCallTool(t, full, "call_tool", map[string]any{"name": "a__echo", "arguments": map[string]any{"text": "same answer"}})
	if testutil.ToolText(via) != testutil.ToolText(direct) || via.IsError {
		t.Errorf("call_tool a__echo = %q, the direct call %q; want the same", testutil.ToolText(via), testutil.ToolText(direct))
	}
	d.Stderr.Await(t, 10*time.Second, "the audit entries of both calls", func(out string) bool { return len(auditOf(out, "full", "a__echo")) >= 2 })
	if a := auditOf(d.Stderr.String(), "full", "a__echo"); len(a) != 2 || a[0] != a[1] || !strings.Contains(a[0], "backend=a") {
		t.Errorf("audit entries of the direct call and call_tool: %q; want two alike", a)
	}

	// Refused by policy: the same error and the same journal entry.
	_, directErr := testutil.CallTool(t, narrow, "a__echo", map[string]any{"text": "x"})
	_, viaErr := testutil.CallTool(t, narrow, "call_tool", map[string]any{"name": "a__echo", "arguments": map[string]any{"text": "x"}})
	if directErr == nil || viaErr == nil || directErr.Error() != viaErr.Error() || !strings.Contains(viaErr.Error(), `unknown tool "a__echo"`) {
		t.Errorf("narrow calling a__echo directly: %v, through call_tool: %v; want the same unknown-tool error", directErr, viaErr)
	}
	refusal := `refused client \"narrow\": tools/call a__echo: tools pattern \"!a__echo\" hides it`
	d.Stderr.Await(t, 10*time.Second, "both refusals journaled", func(out string) bool { return strings.Count(out, refusal) >= 2 })

	// add_tools: in the list with list_changed, at most max_added_tools.
	res := testutil.MustCallTool(t, full, "add_tools", map[string]any{"names": []string{"a__echo", "c__look", "b__echo", "nosuch"}})
	text := testutil.ToolText(res)
	if !strings.Contains(text, "a__echo, c__look") || !strings.Contains(text, "nosuch") || !strings.Contains(text, "at most 2") {
		t.Errorf("add_tools = %q; want two added, nosuch unknown, b__echo over the limit", text)
	}
	events.Await(t, 1, 30*time.Second, "tools/list_changed after add_tools", testutil.Method("notifications/tools/list_changed"))
	if got := names(t, full); fmt.Sprint(got) != "[a__echo add_tools c__look call_tool find_tools]" {
		t.Errorf("tools/list after add_tools = %v", got)
	}

	// A backend that leaves leaves the results, with list_changed.
	if got := found(t, full, "beta", 5); !contains(got, "b__beta") {
		t.Fatalf("find_tools beta = %v before b leaves", got)
	}
	before := events.Count(testutil.Method("notifications/tools/list_changed"))
	config, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	without := regexp.MustCompile(`(?s)\[backends\.b\].*?\n\n`).ReplaceAllString(string(config), "")
	if err := os.WriteFile(d.ConfigPath, []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
	events.Await(t, before+1, 30*time.Second, "tools/list_changed after b left", testutil.Method("notifications/tools/list_changed"))
	testutil.Eventually(t, 30*time.Second, "b__beta gone from the results", func() bool { return !contains(found(t, full, "beta", 20), "b__beta") })
	if _, err := testutil.CallTool(t, full, "call_tool", map[string]any{"name": "b__beta"}); err == nil || !strings.Contains(err.Error(), `unknown tool "b__beta"`) {
		t.Errorf("call_tool b__beta after b left: %v; want unknown tool", err)
	}
}

// TestSearchNeverFindsAHeldTool: a tool that integrity holds back for
// review is not found and cannot be called through call_tool.
func TestSearchNeverFindsAHeldTool(t *testing.T) {
	bins := testutil.Build(t)
	state := t.TempDir()
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.a]
command = %q
args = ["--tools", "alpha"]

[profiles.find]
search = true
`, bins.Fake), testutil.ConfigOptions{Gateway: fmt.Sprintf("integrity = \"pin\"\nstate_directory = %q\n", state)})
	g := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	plain := testutil.Connect(t, g.URL, nil)
	search := testutil.Connect(t, strings.TrimSuffix(g.URL, "/mcp")+"/mcp/find", nil)
	testutil.MustCallTool(t, plain, "a__set_tools", map[string]any{"names": []string{"alpha", "gamma"}})
	g.Stderr.Await(t, 30*time.Second, "a__gamma held for review", func(out string) bool { return strings.Contains(out, "gamma") && strings.Contains(out, "held") })
	if testutil.ToolNames(t, plain)["a__gamma"] {
		t.Fatal("a__gamma is listed: integrity did not hold it, the test proves nothing")
	}
	if got := found(t, search, "gamma", 20); contains(got, "a__gamma") {
		t.Errorf("find_tools found the held a__gamma: %v", got)
	}
	if _, err := testutil.CallTool(t, search, "call_tool", map[string]any{"name": "a__gamma"}); err == nil || !strings.Contains(err.Error(), `unknown tool "a__gamma"`) {
		t.Errorf("call_tool a__gamma: %v; want unknown tool", err)
	}
}

// TestSearchModeStateless: a 2026-07-28 client at a search profile gets
// find_tools and call_tool (no add_tools: it has no session list), and
// call_tool goes the way of a direct call, refusals included.
func TestSearchModeStateless(t *testing.T) {
	d := profileGateway(t, "")
	find := strings.TrimSuffix(d.URL, "/mcp") + "/mcp/find"
	post := func(id int, token, method, name, params string) map[string]any {
		t.Helper()
		resp, body := exchange(t, http.DefaultClient, find, statelessBody(id, method, params), statelessHeaders(token, method, name)...)
		result, errMsg := statelessResult(t, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, body)
		}
		if errMsg != "" {
			return map[string]any{"error": errMsg}
		}
		return result
	}
	list := post(1, fullToken, "tools/list", "", "")
	var listed []string
	for _, tool := range list["tools"].([]any) {
		listed = append(listed, tool.(map[string]any)["name"].(string))
	}
	if fmt.Sprint(listed) != "[find_tools call_tool]" {
		t.Errorf("stateless tools/list in search mode = %v; want find_tools and call_tool", listed)
	}
	res := post(2, fullToken, "tools/call", "find_tools", `"name":"find_tools","arguments":{"query":"look at something"}`)
	if text := fmt.Sprint(res["content"]); !strings.Contains(text, `"name":"c__look"`) {
		t.Errorf("stateless find_tools: %v", res)
	}
	res = post(3, fullToken, "tools/call", "call_tool", `"name":"call_tool","arguments":{"name":"a__echo","arguments":{"text":"stateless via"}}`)
	if !strings.Contains(fmt.Sprint(res["content"]), "stateless via") || res["resultType"] != "complete" {
		t.Errorf("stateless call_tool a__echo: %v", res)
	}
	direct := post(4, narrowToken, "tools/call", "a__echo", `"name":"a__echo","arguments":{"text":"x"}`)
	via := post(5, narrowToken, "tools/call", "call_tool", `"name":"call_tool","arguments":{"name":"a__echo","arguments":{"text":"x"}}`)
	if direct["error"] == nil || fmt.Sprint(direct["error"]) != fmt.Sprint(via["error"]) {
		t.Errorf("narrow's stateless a__echo directly: %v, through call_tool: %v; want the same error", direct, via)
	}
	if res := post(6, fullToken, "tools/call", "add_tools", `"name":"add_tools","arguments":{"names":["a__echo"]}`); !strings.Contains(fmt.Sprint(res["error"]), `unknown tool "add_tools"`) {
		t.Errorf("stateless add_tools: %v; want unknown tool", res)
	}
}

// TestSearchReachesEveryTool: a client that only lists, at a search
// profile in front of the real server-everything, reaches every tool it
// may use: find_tools finds each by what it does (its description) among
// the first five, and call_tool gets to it.
func TestSearchReachesEveryTool(t *testing.T) {
	bin := testutil.NpmServer(t, "mcp-server-everything")
	toml, url := testutil.Config(t, fmt.Sprintf(`
[backends.everything]
command = %q
args = ["stdio"]

[profiles.find]
search = true
`, bin))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	ctx := testutil.Context(t, 60*time.Second)
	all, err := testutil.Connect(t, d.URL, nil).ListTools(ctx, nil)
	if err != nil || len(all.Tools) < 10 {
		t.Fatalf("server-everything's tools: %v, %v", all, err)
	}
	search := testutil.Connect(t, strings.TrimSuffix(d.URL, "/mcp")+"/mcp/find", nil)
	for _, tool := range all.Tools {
		if got := found(t, search, tool.Description, 5); !contains(got, tool.Name) {
			t.Errorf("find_tools for %q (the description of %s) = %v", tool.Description, tool.Name, got)
		}
		// A tool may refuse the empty arguments, or take long: either way
		// the call got to it; only an unknown tool did not.
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := search.CallTool(callCtx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": tool.Name, "arguments": map[string]any{}}})
		cancel()
		if err != nil && strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("call_tool %s: %v", tool.Name, err)
		}
	}
}

// TestSearchModeRetryIsBoundToTheTool: the requestState of a call made
// through call_tool is bound to the tool it called. A retry through
// call_tool naming another tool resumes nothing, is refused as for
// another request, and is audited as nothing; the retry naming the same
// tool resumes the call. Before, the binding was call_tool's own, and a
// retry naming a__echo got a__sample's answer, audited as a__echo.
func TestSearchModeRetryIsBoundToTheTool(t *testing.T) {
	d := profileGateway(t, "")
	at := *d
	at.URL = strings.TrimSuffix(d.URL, "/mcp") + "/mcp/find"
	gw := &inputGW{d: &at}
	via := func(id int, tool, extra string) *mrtrAnswer {
		return gw.call(t, fullToken, id, "call_tool", fmt.Sprintf(`{"name":%q,"arguments":{}}`, tool), samplingCaps, extra)
	}
	a := via(1, "a__sample", "")
	key, state := mustInputRequired(t, a, "sampling/createMessage")["sampling/createMessage"], a.Result.RequestState
	responses := map[string]string{key: `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}`}
	mustRefuse(t, via(2, "a__echo", retryParams(responses, state)), "other-request")
	if b := via(3, "a__sample", retryParams(responses, state)); b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(string(b.Result.StructuredContent), "sampled") {
		t.Fatalf("the retry naming the tool called: %s", b.raw)
	}
	for _, line := range strings.Split(d.Stderr.String(), "\n") {
		if containsAll(line, "message_id="+journal.MessageAudit.String(), "tool=a__echo") {
			t.Errorf("the refused retry was audited as a call of a__echo: %s", line)
		}
	}
}
