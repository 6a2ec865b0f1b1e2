package itest

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// A tools/call whose backend dies before answering goes to the fallback
// that has the same tool, and the result's _meta says who served it.
func TestFallbackWhenTheChildDiesBeforeAnswering(t *testing.T) {
	d := gateway(t, `
[backends.a]
command = "FAKE"
args = ["--crash-after", "0"]
fallback = ["b"]
max_restarts = 0

[backends.b]
command = "FAKE"
`)
	c := newRawClient(t, d.URL)
	a := lastAnswer(t, c.post(t, callBody(1, "a__echo", `{"text":"via b"}`)))
	if a.Error != nil {
		t.Fatalf("call whose backend died before answering: %+v; want it served by the fallback", a.Error)
	}
	var res struct {
		Meta              map[string]any `json:"_meta"`
		StructuredContent struct {
			Text string `json:"text"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(a.Result, &res); err != nil || res.Meta["io.mcpgate/servedBy"] != "b" || res.StructuredContent.Text != "via b" {
		t.Fatalf("result %s; want _meta io.mcpgate/servedBy = b and the echo", a.Result)
	}
	awaitLog(t, d, "tools/call sent to a fallback backend")
	awaitLog(t, d, "message_id="+journal.MessageFallback.String())
}

// A call that got part of its answer (progress) is never sent again: the
// tool's side effects must not happen twice.
func TestNoFallbackAfterAPartialAnswer(t *testing.T) {
	dir := t.TempDir()
	d := gateway(t, `
[backends.a]
command = "FAKE"
fallback = ["b"]

[backends.b]
command = "FAKE"
args = ["--record", "`+dir+`/b"]
`)
	c := newRawClient(t, d.URL)
	_, body := c.do(t, "POST", `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"a__progress","arguments":{"steps":1,"crash":true},"_meta":{"progressToken":"t"}}}`, nil)
	a := lastAnswer(t, body)
	if a.Error == nil || !strings.Contains(body, "notifications/progress") {
		t.Fatalf("answer %s; want the progress, then an error: the backend died mid-answer", body)
	}
	if rec, _ := os.ReadFile(dir + "/b"); strings.Contains(string(rec), "progress") {
		t.Errorf("the call went to the fallback after a partial answer:\n%s", rec)
	}
}

// A crash during 100 calls: the tools stay listed through the restart,
// calls made during it succeed after it, and no list_changed goes out when
// the catalog did not change.
func TestCrashKeepsTheCatalogAndCallsWait(t *testing.T) {
	// 100 calls at once, beyond the default max_concurrent_requests.
	d := gatewayWith(t, `max_concurrent_requests = 200`, `
[backends.c]
command = "FAKE"
restart_backoff_initial = "300ms"
`)
	events := testutil.NewClientEvents("c")
	cs := d.Connect(t, events.ClientOptions())
	before := testutil.FakeProcess(t, cs, "c__pid")
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := map[string]any{"ms": 200 + i}
			if _, err := testutil.CallTool(t, cs, "c__slow", args); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	testutil.MustCallTool(t, cs, "c__echo", map[string]any{"text": "in flight"})
	if _, err := testutil.CallTool(t, cs, "c__crash", nil); err == nil {
		t.Fatal("crash answered")
	}
	// During the restart the tools stay listed and calls wait for it.
	if !testutil.ToolNames(t, cs)["c__echo"] {
		t.Error("c__echo vanished from the catalog during the restart")
	}
	res := testutil.MustCallTool(t, cs, "c__pid", nil)
	var p testutil.Process
	structured(t, res, &p)
	if p.PID == before.PID {
		t.Errorf("pid %d answered after the crash; want the new child's", p.PID)
	}
	wg.Wait()
	t.Logf("%d of 100 calls in flight failed with the crash", failed)
	if n := events.Count(testutil.Method("notifications/tools/list_changed")); n != 0 {
		t.Errorf("%d tools/list_changed for a restart that changed nothing", n)
	}
}

// A backend whose command does not exist does not hold back READY=1 or
// the other backends' clients while it retries.
func TestMissingCommandDoesNotDelayReady(t *testing.T) {
	d := gateway(t, `
[backends.ok]
command = "FAKE"

[backends.missing]
command = "/nonexistent/mcp-server"
restart_backoff_initial = "1h"
restart_backoff_max = "1h"
`)
	cs := d.Connect(t, nil)
	testutil.MustCallTool(t, cs, "ok__echo", map[string]any{"text": "ready"})
}

// TestFallbackKeepsThePolicy: a client whose policy hides the fallback's
// tool does not get its call served there when the primary fails: the
// fallback is what the client may use, or nothing. A call a fallback
// serves is audited as the fallback's. Before, the fallback's tool was
// never checked against the client's policy, and its execution was not
// audited.
func TestFallbackKeepsThePolicy(t *testing.T) {
	bins := testutil.Build(t)
	toml, u := testutil.ConfigWith(t, strings.ReplaceAll(`
[backends.a]
command = "FAKE"
args = ["--crash-after", "1"]
fallback = ["b"]
max_restarts = 0

[backends.b]
command = "FAKE"

[clients.narrow]
token_sha256 = "`+sha256Hex(aliceToken)+`"
tools = ["a__*"]

[clients.wide]
token_sha256 = "`+sha256Hex(bobToken)+`"
`, "FAKE", bins.Fake), testutil.ConfigOptions{Auth: "required", Gateway: `audit = "calls"`})
	d := testutil.StartDaemon(t, toml, u, testutil.DaemonOptions{})
	narrow := testutil.ConnectHTTP(t, d.URL, tokenClient(aliceToken), nil)
	wide := testutil.ConnectHTTP(t, d.URL, tokenClient(bobToken), nil)
	// a dies at its second call, and is not restarted.
	testutil.MustCallTool(t, wide, "a__echo", map[string]any{"text": "by a"})
	if res, err := testutil.CallTool(t, narrow, "a__echo", map[string]any{"text": "via b"}); err == nil && !res.IsError {
		t.Errorf("a client that may not use b__echo got its call served by b: %+v", res)
	}
	if res, err := testutil.CallTool(t, wide, "a__echo", map[string]any{"text": "via b"}); err != nil || res.IsError || res.Meta["io.mcpgate/servedBy"] != "b" {
		t.Fatalf("a client that may use b__echo: %+v, %v; want it served by b", res, err)
	}
	d.Stderr.Await(t, 10*time.Second, "the fallback's audit entry", func(out string) bool {
		for _, line := range strings.Split(out, "\n") {
			if containsAll(line, "message_id="+journal.MessageAudit.String(), "client=wide", "backend=b", "tool=a__echo", "outcome=ok") {
				return true
			}
		}
		return false
	})
}
