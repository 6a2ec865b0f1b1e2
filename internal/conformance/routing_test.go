package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// routingWait bounds everything TestConformanceRouting awaits.
const routingWait = 60 * time.Second

// TestConformanceRouting is the second run of issue 6: the go-sdk fixture, the
// npm server-everything and a fake server behind one gateway, with tool
// prefixes, and two concurrent sessions. Requests the backends send to
// their client (sampling, elicitation, roots), progress and cancellation
// must reach the session whose call caused them, and no other.
func TestConformanceRouting(t *testing.T) {
	if os.Getenv("MCPGATE_CONFORMANCE") != "1" {
		t.Skip("routing through the gateway with the conformance fixture not requested: set MCPGATE_CONFORMANCE=1 (make conformance does)")
	}
	everything := testutil.NpmServer(t, "mcp-server-everything")
	tk := installTools(t)
	everythingJS, err := filepath.EvalSymlinks(everything)
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "fake.record")
	// The fixture's tools ask their client the 2025 way (go-sdk's
	// CreateMessage, Elicit), which go-sdk refuses on a connection of
	// 2026-07-28: the routing of such requests to 2025 sessions is tested
	// with the fixture initialized (era = "legacy"), as mcpgated(8) says
	// to configure such a server.
	toml, url := testutil.Config(t, fmt.Sprintf(`
[backends.fixture]
command = %q
`+eraLegacy+`

[backends.everything]
command = %q
args = [%q, "stdio"]

[backends.fake]
command = %q
args = ["--record", %q]
`, tk.fixture, tk.node, everythingJS, testutil.Build(t).Fake, record))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})

	// server-everything asks for roots 350ms after its handshake. With no
	// call in flight and no roots configured the gateway answers with none
	// (nobody to ask); wait for that before any call, so that the request
	// cannot be attributed to one.
	testutil.Eventually(t, routingWait, "server-everything's startup roots/list to be answered", func() bool {
		return strings.Contains(d.Stderr.String(), "Roots updated: 0 root(s) received from client")
	})
	if out := d.Stderr.String(); strings.Contains(out, "Failed to request roots from client") {
		t.Errorf("server-everything's startup roots/list was refused:\n%s", out)
	}

	evA, evB := testutil.NewClientEvents("A"), testutil.NewClientEvents("B")
	a := routingConnect(t, url, evA, "file:///client/a")
	b := routingConnect(t, url, evB, "file:///client/b")
	awaitTools(t, a, evA, "fixture__test_sampling", "everything__trigger-sampling-request",
		"everything__trigger-elicitation-request", "everything__get-roots-list", "fake__wait_cancel")

	t.Run("sampling", func(t *testing.T) {
		if got := routingText(t, a, "fixture__test_sampling", map[string]any{"prompt": "prompt of A"}); got != "LLM response: from A" {
			t.Errorf("A's fixture__test_sampling = %q, want A's answer", got)
		}
		if got := routingText(t, b, "everything__trigger-sampling-request", map[string]any{"prompt": "prompt of B", "maxTokens": 10}); !strings.Contains(got, "from B") {
			t.Errorf("B's everything__trigger-sampling-request = %q, want B's answer", got)
		}
		checkRequests(t, evA, "sampling/createMessage", "prompt of A")
		checkRequests(t, evB, "sampling/createMessage", "prompt of B")
	})

	t.Run("elicitation", func(t *testing.T) {
		if got := routingText(t, b, "fixture__test_elicitation", map[string]any{"message": "question for B"}); !strings.Contains(got, "username:B") {
			t.Errorf("B's fixture__test_elicitation = %q, want B's answer", got)
		}
		if got := routingText(t, a, "everything__trigger-elicitation-request", nil); !strings.Contains(got, `"A"`) {
			t.Errorf("A's everything__trigger-elicitation-request = %q, want A's answer", got)
		}
		checkRequests(t, evA, "elicitation/create", "Please provide inputs")
		checkRequests(t, evB, "elicitation/create", "question for B")
	})

	t.Run("roots", func(t *testing.T) {
		// server-everything caches the first roots it gets, as a server of
		// one client would: the empty list of its start, never a client's.
		if got := routingText(t, b, "everything__get-roots-list", nil); strings.Contains(got, "file:///client/") {
			t.Errorf("B's everything__get-roots-list = %q, want no client's roots (it keeps those of its start)", got)
		}
		// The fake server asks at every call: each client gets its own.
		if got := routingText(t, a, "fake__roots", nil); !strings.Contains(got, "file:///client/a") || strings.Contains(got, "file:///client/b") {
			t.Errorf("A's fake__roots = %q, want A's roots only", got)
		}
		if got := routingText(t, b, "fake__roots", nil); !strings.Contains(got, "file:///client/b") || strings.Contains(got, "file:///client/a") {
			t.Errorf("B's fake__roots = %q, want B's roots only", got)
		}
	})

	t.Run("progress with equal tokens", func(t *testing.T) {
		same := progressToken("same")
		var wg sync.WaitGroup
		for _, cs := range []*mcp.ClientSession{a, b} {
			wg.Go(func() {
				for _, c := range []struct {
					tool string
					args map[string]any
				}{
					{"fixture__test_tool_with_progress", nil},
					{"everything__trigger-long-running-operation", map[string]any{"duration": 0.2, "steps": 2}},
				} {
					if _, err := routingCall(cs, context.Background(), c.tool, c.args, "same"); err != nil {
						t.Errorf("%s: %v", c.tool, err)
					}
				}
			})
		}
		wg.Wait()
		for _, c := range []struct {
			cs *mcp.ClientSession
			ev *testutil.ClientEvents
		}{{a, evA}, {b, evB}} {
			c.ev.Await(t, 5, routingWait, `progress with token "same"`, same)
			// Anything misrouted to this session came before the barrier.
			if _, err := routingCall(c.cs, context.Background(), "fake__progress", map[string]any{"steps": 1}, "barrier"); err != nil {
				t.Fatal(err)
			}
			c.ev.Await(t, 1, routingWait, "the barrier progress", progressToken("barrier"))
			if n := c.ev.Count(same); n != 5 {
				t.Errorf("%s got %d progress notifications with its token, want its own 5: %s", c.ev.Name, n, c.ev)
			}
		}
	})

	t.Run("cancellation", func(t *testing.T) {
		// Both sessions run the same long operation; A cancels. B's call
		// must still be answered.
		ctxA, cancelA := context.WithCancel(context.Background())
		defer cancelA()
		doneA, doneB := make(chan error, 1), make(chan error, 1)
		var resB *mcp.CallToolResult
		go func() {
			_, err := routingCall(a, ctxA, "everything__trigger-long-running-operation", map[string]any{"duration": 2, "steps": 4}, "long")
			doneA <- err
		}()
		go func() {
			var err error
			resB, err = routingCall(b, context.Background(), "everything__trigger-long-running-operation", map[string]any{"duration": 2, "steps": 4}, "long")
			doneB <- err
		}()
		evA.Await(t, 1, routingWait, "A's first progress", progressToken("long"))
		evB.Await(t, 1, routingWait, "B's first progress", progressToken("long"))
		cancelA()
		if err := <-doneA; !errors.Is(err, context.Canceled) {
			t.Errorf("A's cancelled call returned %v", err)
		}
		if err := <-doneB; err != nil || resB.IsError || !strings.Contains(testutil.ToolText(resB), "Long running operation completed") {
			t.Errorf("B's call after A cancelled its own: %v %+v", err, resB)
		}

		// The fake server shows which backend request the cancel named.
		ctxA2, cancelA2 := context.WithCancel(context.Background())
		ctxB2, cancelB2 := context.WithCancel(context.Background())
		defer cancelB2()
		go routingCall(a, ctxA2, "fake__wait_cancel", map[string]any{"who": "A"}, nil)
		go routingCall(b, ctxB2, "fake__wait_cancel", map[string]any{"who": "B"}, nil)
		idA := recordedID(t, record, `"who":"A"`)
		idB := recordedID(t, record, `"who":"B"`)
		cancelA2()
		awaitCancellation(t, b, idA)
		if got := fakeCancellations(t, b); len(got) != 1 {
			t.Errorf("the fake server got cancellations for %v; want only A's request %s", got, idA)
		}
		cancelB2()
		awaitCancellation(t, a, idB)
	})

	// Over the whole run each session answered only its own requests.
	for _, c := range []struct {
		ev            *testutil.ClientEvents
		sampling, eli int
	}{{evA, 1, 1}, {evB, 1, 1}} {
		if n := c.ev.Count(testutil.Method("sampling/createMessage")); n != c.sampling {
			t.Errorf("%s answered %d sampling requests, want %d", c.ev.Name, n, c.sampling)
		}
		if n := c.ev.Count(testutil.Method("elicitation/create")); n != c.eli {
			t.Errorf("%s answered %d elicitation requests, want %d", c.ev.Name, n, c.eli)
		}
	}
}

func routingConnect(t *testing.T, url string, ev *testutil.ClientEvents, root string) *mcp.ClientSession {
	t.Helper()
	opts := ev.ClientOptions()
	eli := opts.ElicitationHandler
	opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		res, err := eli(ctx, req)
		if res != nil {
			res.Content["username"] = ev.Name // the fixture asks for a username
		}
		return res, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "client-" + ev.Name, Version: "1"}, opts)
	client.AddRoots(&mcp.Root{URI: root})
	ctx, cancel := context.WithTimeout(context.Background(), routingWait)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{}, MaxRetries: -1}, testutil.LegacySession())
	if err != nil {
		t.Fatalf("connect %s: %v", ev.Name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// awaitTools waits until the catalog has every named tool: server-everything
// registers some only after its handshake and announces them.
func awaitTools(t *testing.T, cs *mcp.ClientSession, ev *testutil.ClientEvents, names ...string) {
	t.Helper()
	for changes := 0; ; changes++ {
		have := map[string]bool{}
		for tool, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			have[tool.Name] = true
		}
		var missing []string
		for _, n := range names {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		ev.Await(t, changes+1, routingWait, fmt.Sprintf("tools/list_changed bringing %q", missing), testutil.Method("notifications/tools/list_changed"))
	}
}

func routingCall(cs *mcp.ClientSession, ctx context.Context, name string, args any, token any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, routingWait)
	defer cancel()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		params.SetProgressToken(token)
	}
	return cs.CallTool(ctx, params)
}

// routingText calls a tool and returns its text; an error fails the test.
func routingText(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := routingCall(cs, context.Background(), name, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Errorf("%s answered with an error: %s", name, testutil.ToolText(res))
	}
	return testutil.ToolText(res)
}

// checkRequests checks that ev answered exactly one request of method, and
// that it carried want.
func checkRequests(t *testing.T, ev *testutil.ClientEvents, method, want string) {
	t.Helper()
	var got []string
	for _, e := range ev.Events() {
		if e.Method == method {
			data, _ := json.Marshal(e.Params)
			got = append(got, string(data))
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Errorf("%s answered %s requests %q; want exactly one, carrying %q", ev.Name, method, got, want)
	}
}

func progressToken(token string) func(testutil.ClientEvent) bool {
	return func(ev testutil.ClientEvent) bool {
		p, ok := ev.Params.(*mcp.ProgressNotificationParams)
		return ok && p.ProgressToken == token
	}
}

// recordedID waits until the fake server read a tools/call containing part
// and returns the request's id.
func recordedID(t *testing.T, path, part string) string {
	t.Helper()
	var id string
	testutil.Eventually(t, routingWait, "the fake server to read a call with "+part, func() bool {
		data, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"tools/call"`) && strings.Contains(line, part) {
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				json.Unmarshal([]byte(line), &m)
				id = string(m.ID)
				return true
			}
		}
		return false
	})
	return id
}

// fakeCancellations returns the request ids the fake server got
// notifications/cancelled for.
func fakeCancellations(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := routingCall(cs, context.Background(), "fake__cancelled", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Cancelled []struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"cancelled"`
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &sc); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range sc.Cancelled {
		ids = append(ids, string(c.RequestID))
	}
	return ids
}

// awaitCancellation waits until the fake server got notifications/cancelled
// for the backend request id.
func awaitCancellation(t *testing.T, cs *mcp.ClientSession, id string) {
	t.Helper()
	testutil.Eventually(t, routingWait, "notifications/cancelled for the fake's request "+id, func() bool {
		for _, got := range fakeCancellations(t, cs) {
			if got == id {
				return true
			}
		}
		return false
	})
}
