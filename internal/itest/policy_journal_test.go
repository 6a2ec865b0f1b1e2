package itest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// TestPolicyRefusalsAreJournaled: a client calling a tool, reading a
// resource or getting a prompt its policy hides gets the error of an
// unknown name, as before, and the journal (the real journald) gets an
// entry naming the client, the method, the name and the rule that
// decided; a name that does not exist is no refusal. Per client and
// minute the first five are journaled, the rest counted. journalctl finds
// them by MCPGATE_CLIENT, the match of mcpgatectl logs --client (issue
// 22, item 4).
func TestPolicyRefusalsAreJournaled(t *testing.T) {
	j := journaldtest.Start(t)
	bins := testutil.Build(t)
	toml, url := journalConfig(t, journal.TargetJournal, "", fmt.Sprintf(`
[backends.a]
command = %[1]q
args = ["--tools", "alpha", "--prompts", "--resources", "2"]

[backends.b]
command = %[1]q
args = ["--tools", "beta", "--prompts"]

[clients.narrow]
token_sha256 = %[2]q
tools = ["*", "!b__*"]
prompts = ["a__*"]
resources = ["fake://r/0"]
`, bins.Fake, sha256Hex(narrowToken)))
	toml = strings.Replace(toml, `auth = "none"`, `auth = "required"`, 1)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Args: []string{"--journal-socket", j.Socket()}})
	narrow := testutil.ConnectHTTP(t, d.URL, tokenClient(narrowToken), nil)
	ctx := testutil.Context(t, 60*time.Second)

	if _, err := testutil.CallTool(t, narrow, "b__echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), `unknown tool "b__echo"`) {
		t.Errorf("narrow calling b__echo: %v, want the unknown-tool error", err)
	}
	if _, err := testutil.CallTool(t, narrow, "zz__nothing", nil); err == nil {
		t.Error("narrow calling a tool that does not exist: no error")
	}
	if _, err := narrow.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fake://r/1"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("narrow reading fake://r/1: %v, want resource not found", err)
	}
	if _, err := narrow.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b__greet"}); err == nil || !strings.Contains(err.Error(), `unknown prompt "b__greet"`) {
		t.Errorf("narrow getting b__greet: %v, want unknown prompt", err)
	}
	denied := func(more journaldtest.Entry) journaldtest.Entry {
		m := daemonLog(journal.MessageAccessDenied, journaldtest.Entry{"MCPGATE_CLIENT": "narrow"})
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	for _, want := range []journaldtest.Entry{
		{"MCPGATE_METHOD": "tools/call", "MCPGATE_TOOL": "b__echo", "MCPGATE_REASON": `tools pattern "!b__*" hides it`,
			"MESSAGE": `refused client "narrow": tools/call b__echo: tools pattern "!b__*" hides it`, "PRIORITY": "4"},
		{"MCPGATE_METHOD": "resources/read", "MCPGATE_URI": "fake://r/1", "MCPGATE_REASON": "no pattern of resources shows it"},
		{"MCPGATE_METHOD": "prompts/get", "MCPGATE_PROMPT": "b__greet", "MCPGATE_REASON": "no pattern of prompts shows it"},
	} {
		got := j.AwaitMatch(t, 1, denied(want))
		if sess := got[0]["MCPGATE_SESSION"]; sess == "" {
			t.Errorf("refusal without MCPGATE_SESSION: %s", journaldtest.Dump(got))
		}
	}

	// A call with its name twice is refused with -32600, and journaled
	// like a policy refusal (issue 21, defect 1).
	raw := rawSessionOf(t, d.URL, narrowToken, "2025-06-18")
	if _, msgs := raw.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","name":"b__echo","arguments":{}}}`); len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != -32600 {
		t.Errorf("a call with its name twice: %+v, want error -32600", msgs)
	}
	j.AwaitMatch(t, 1, denied(journaldtest.Entry{"MCPGATE_METHOD": "tools/call",
		"MESSAGE": `refused client "narrow": tools/call with an ambiguous member`}))

	// One more refusal reaches the limit of five per minute; the rest are
	// counted. A call that is audited afterwards is the barrier: its entry
	// comes after every refusal that was journaled.
	for range 4 {
		testutil.CallTool(t, narrow, "b__beta", nil)
	}
	testutil.MustCallTool(t, narrow, "a__echo", map[string]any{"text": "barrier"})
	j.AwaitMatch(t, 1, daemonLog(journal.MessageAudit, journaldtest.Entry{"MCPGATE_CLIENT": "narrow", "MCPGATE_TOOL": "a__echo"}))
	all := journaldtest.Select(j.Entries(t), denied(nil))
	if len(all) != 5 {
		t.Errorf("%d refusals of narrow journaled, want 5 (the rest counted):\n%s", len(all), journaldtest.Dump(all))
	} else if !strings.Contains(all[4]["MCPGATE_NOTE"], "counted, not logged") {
		t.Errorf("the fifth refusal does not say that further ones are counted: %s", journaldtest.Dump(all[4:]))
	}
	for _, e := range all {
		if e["MCPGATE_TOOL"] == "zz__nothing" {
			t.Errorf("a tool that does not exist was journaled as a refusal: %s", journaldtest.Dump([]journaldtest.Entry{e}))
		}
	}

	// What mcpgatectl logs --client narrow shows, without its --unit
	// (this journal has no units).
	jctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(jctx, "journalctl", "--directory="+j.Dir(), "--output=cat", "MCPGATE_CLIENT=narrow").CombinedOutput()
	if err != nil {
		t.Fatalf("journalctl: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `refused client "narrow": prompts/get b__greet: no pattern of prompts shows it`) {
		t.Errorf("journalctl MCPGATE_CLIENT=narrow shows no refusal:\n%s", out)
	}
}
