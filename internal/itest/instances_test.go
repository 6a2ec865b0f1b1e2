package itest

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// pooledBackend gives each session an instance of its own, at most two.
const pooledBackend = `
[backends.ded]
command = "FAKE"
instance = "session"
pool_min_idle = 1
pool_max = 2
pool_acquire_timeout = "1s"
pool_replenish_delay = "100ms"
`

// alive reports whether pid is a living process (not a zombie).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil && testutil.State(pid) != "Z"
}

func TestSessionInstancesAreDedicated(t *testing.T) {
	d := lifecycleGateway(t, t.TempDir(), pooledBackend)
	testutil.Eventually(t, 30*time.Second, "the pool's idle instance", func() bool { return len(children(d)) == 1 })
	a, b := d.Connect(t, nil), d.Connect(t, nil)

	// Interleaved calls: each session counts on its own process.
	type seen struct{ pid, count int }
	var got [2][]seen
	for _, i := range []int{0, 1, 0, 1, 0} {
		cs := []*mcp.ClientSession{a, b}[i]
		pid, n := counter(t, testutil.MustCallTool(t, cs, "ded__pid", nil).StructuredContent)
		got[i] = append(got[i], seen{pid, n})
	}
	for i, calls := range got {
		for j, c := range calls {
			if c.pid != calls[0].pid || c.count != j+1 {
				t.Errorf("session %d, call %d: pid %d count %d; want pid %d count %d", i, j, c.pid, c.count, calls[0].pid, j+1)
			}
		}
	}
	pidA, pidB := got[0][0].pid, got[1][0].pid
	if pidA == pidB {
		t.Fatalf("both sessions were served by process %d", pidA)
	}

	// pool_max instances are bound: a third session waits, then gets the
	// error that names the limit.
	c := d.Connect(t, nil)
	begin := time.Now()
	res, err := testutil.CallTool(t, c, "ded__pid", nil)
	if err == nil && !res.IsError {
		t.Fatalf("a third session got an instance beyond pool_max: %v", res.StructuredContent)
	}
	if err == nil || !strings.Contains(err.Error(), "pool_acquire_timeout") || !strings.Contains(err.Error(), "pool_max") {
		t.Errorf("third session: error %v, want one naming pool_acquire_timeout and pool_max", err)
	}
	t.Logf("the third session waited %s for its error", time.Since(begin).Round(time.Millisecond))

	// Ending a session stops its instance; the pool refills, and the
	// waiting session gets a fresh one, never a used one.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "session a's instance to stop", func() bool { return !alive(pidA) })
	pidC, n := counter(t, testutil.MustCallTool(t, c, "ded__pid", nil).StructuredContent)
	if pidC == pidA || pidC == pidB || n != 1 {
		t.Errorf("third session: pid %d count %d; want a fresh process (not %d or %d) with count 1", pidC, n, pidA, pidB)
	}
	if pid, n := counter(t, testutil.MustCallTool(t, b, "ded__pid", nil).StructuredContent); pid != pidB || n != 3 {
		t.Errorf("session b after the others: pid %d count %d, want its own %d with count 3", pid, n, pidB)
	}
	// One catalog entry for all the instances.
	tools := testutil.ToolNames(t, b)
	if !tools["ded__pid"] || len(tools) != len(testutil.ToolNames(t, c)) {
		t.Errorf("tools %v", tools)
	}
}

func TestInstanceSamplingGoesToItsSession(t *testing.T) {
	d := lifecycleGateway(t, t.TempDir(), strings.Replace(pooledBackend, "pool_min_idle = 1", "pool_min_idle = 2", 1))
	// Session one's sampling handler holds its call in flight until session
	// two's sampling request has been answered.
	one, two := testutil.NewClientEvents("one"), testutil.NewClientEvents("two")
	release := make(chan struct{})
	opts := one.ClientOptions()
	opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		one.Add("sampling/createMessage", req.Params)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test-one", Content: &mcp.TextContent{Text: "from one"}}, nil
	}
	csOne, csTwo := d.Connect(t, opts), d.Connect(t, two.ClientOptions())
	done := make(chan string, 1)
	go func() {
		res, err := testutil.CallTool(t, csOne, "ded__sample", nil)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- testutil.ToolText(res)
	}()
	one.Await(t, 1, 30*time.Second, "session one's sampling request", testutil.Method("sampling/createMessage"))

	res := testutil.MustCallTool(t, csTwo, "ded__sample", nil)
	close(release)
	if text := testutil.ToolText(res); !strings.Contains(text, "from two") {
		t.Errorf("session two's instance got %q, want the answer of session two", text)
	}
	if text := <-done; !strings.Contains(text, "from one") {
		t.Errorf("session one's instance got %q, want the answer of session one", text)
	}
	if n := one.Count(testutil.Method("sampling/createMessage")); n != 1 {
		t.Errorf("session one saw %d sampling requests, want its own only", n)
	}
}

// An instance's stderr, its MCP log messages and the daemon's entries about
// it carry MCPGATE_INSTANCE=N, N as in its name NAME-N.
func TestJournalInstanceField(t *testing.T) {
	j := journaldtest.Start(t)
	d := journalGateway(t, j, "", strings.Replace(pooledBackend, "pool_min_idle = 1", "pool_min_idle = 0", 1))
	cs := d.Connect(t, nil)
	child := testutil.FakeProcess(t, cs, "ded__pid").PID
	testutil.MustCallTool(t, cs, "ded__stderr", map[string]any{"text": "from an instance"})
	testutil.MustCallTool(t, cs, "ded__log", map[string]any{"level": "warning", "data": "logged by an instance"})
	got := j.AwaitMatch(t, 2, entry{"SYSLOG_IDENTIFIER": "mcpgate-ded", "MCPGATE_BACKEND_PID": strconv.Itoa(child)})
	n := 0
	for _, e := range got {
		n++
		if e["MCPGATE_INSTANCE"] != "1" || e["MCPGATE_BACKEND"] != "ded" {
			t.Errorf("entry %q: MCPGATE_INSTANCE=%q MCPGATE_BACKEND=%q, want 1 and ded", e["MESSAGE"], e["MCPGATE_INSTANCE"], e["MCPGATE_BACKEND"])
		}
	}
	if n != 2 {
		t.Errorf("%d entries of instance 1's child %d, want its stderr line and its log message:\n%s", n, child, journaldtest.Dump(got))
	}
	spawned := j.AwaitMatch(t, 1, daemonLog(journal.MessageSpawn, entry{"MCPGATE_BACKEND": "ded"}))
	if spawned[0]["MCPGATE_INSTANCE"] != "1" {
		t.Errorf("spawn entry: MCPGATE_INSTANCE=%q, want 1", spawned[0]["MCPGATE_INSTANCE"])
	}
}

// An instance that crashes is restarted for its session, by the restart
// policy of its own; the other sessions' instances are untouched.
func TestInstanceRestartsForItsSession(t *testing.T) {
	d := lifecycleGateway(t, t.TempDir(), strings.Replace(pooledBackend, "pool_min_idle = 1", "pool_min_idle = 2", 1)+
		"restart_backoff_initial = \"20ms\"\n")
	a, b := d.Connect(t, nil), d.Connect(t, nil)
	pidA, _ := counter(t, testutil.MustCallTool(t, a, "ded__pid", nil).StructuredContent)
	pidB, _ := counter(t, testutil.MustCallTool(t, b, "ded__pid", nil).StructuredContent)
	testutil.CallTool(t, a, "ded__crash", map[string]any{"code": 3})
	testutil.Eventually(t, 30*time.Second, "session a's instance to be restarted", func() bool {
		res, err := testutil.CallTool(t, a, "ded__pid", nil)
		if err != nil || res.IsError {
			return false
		}
		pid, n := counter(t, res.StructuredContent)
		if pid == pidA {
			return false
		}
		if pid == pidB || n != 1 {
			t.Fatalf("after the crash session a got pid %d count %d; want a fresh process of its own", pid, n)
		}
		return true
	})
	if pid, n := counter(t, testutil.MustCallTool(t, b, "ded__pid", nil).StructuredContent); pid != pidB || n != 2 {
		t.Errorf("session b: pid %d count %d, want its own %d with count 2", pid, n, pidB)
	}
}

// Each session's subscription reaches its own instance, and an instance's
// resource updates reach its own session only.
func TestInstanceSubscriptionsAreTheSessions(t *testing.T) {
	config := strings.Replace(pooledBackend, "pool_min_idle = 1", "pool_min_idle = 2", 1)
	config = strings.Replace(config, "command = \"FAKE\"\n", "command = \"FAKE\"\nargs = [\"--resources\", \"1\"]\n", 1)
	d := lifecycleGateway(t, t.TempDir(), config)
	const uri = "fake://r/0"
	events := []*testutil.ClientEvents{testutil.NewClientEvents("a"), testutil.NewClientEvents("b")}
	for _, ev := range events {
		cs := d.Connect(t, ev.ClientOptions())
		if err := cs.Subscribe(testutil.Context(t, 30*time.Second), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("session %s: subscribe: %v", ev.Name, err)
		}
		var touched struct{ Subscribed bool }
		structured(t, testutil.MustCallTool(t, cs, "ded__touch", map[string]any{"uri": uri}), &touched)
		if !touched.Subscribed {
			t.Errorf("session %s's instance was not subscribed to %s", ev.Name, uri)
		}
		ev.Await(t, 1, 30*time.Second, "session "+ev.Name+"'s resource update", testutil.Method("notifications/resources/updated"))
	}
	for _, ev := range events {
		if n := ev.Count(testutil.Method("notifications/resources/updated")); n != 1 {
			t.Errorf("session %s got %d resource updates, want its own instance's one", ev.Name, n)
		}
	}
}

// A request from a dedicated instance reaches its session even when no call
// of the session is in flight on it: a shared backend would have to refuse
// it, not knowing whose it is.
func TestInstanceRequestWithoutCallInFlight(t *testing.T) {
	d := lifecycleGateway(t, t.TempDir(), pooledBackend)
	ev := testutil.NewClientEvents("own")
	cs := d.Connect(t, ev.ClientOptions())
	testutil.MustCallTool(t, cs, "ded__request", map[string]any{
		"method": "sampling/createMessage", "detach": true,
		"params": map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "hi"}}}, "maxTokens": 10},
	})
	ev.Await(t, 1, 30*time.Second, "the instance's sampling request with no call in flight", testutil.Method("sampling/createMessage"))
}
