package itest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// sharedInputGateway runs mcpgated with the clients alice and bob and two
// shared 2025-11-25 backends that ask their client mid-call: fake (a fake
// server recording what it reads, whose calls wait at most 3 s for a
// stateless client's retry) and everything (server-everything).
func sharedInputGateway(t *testing.T) *inputGW {
	t.Helper()
	bins := testutil.Build(t)
	gw := &inputGW{fakeRecord: filepath.Join(t.TempDir(), "fake.jsonl")}
	backends := fmt.Sprintf(`
[backends.fake]
command = %q
args = ["--record", %q]
input_retry_timeout = "3s"

[backends.everything]
command = %q
args = ["stdio"]

[clients.alice]
token_sha256 = %q

[clients.bob]
token_sha256 = %q
`, bins.Fake, gw.fakeRecord, testutil.NpmServer(t, "mcp-server-everything"), sha256Hex(aliceToken), sha256Hex(bobToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	gw.d = testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	return gw
}

// samplingSession is a 2025 session of the client with token whose
// sampling handler answers "from the session" and records the prompts it
// was shown.
func samplingSession(t *testing.T, url, token string) (*mcp.ClientSession, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var shown []string
	client := mcp.NewClient(&mcp.Implementation{Name: "itest-2025", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			b, _ := json.Marshal(req.Params.Messages)
			mu.Lock()
			shown = append(shown, string(b))
			mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "from the session"}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: tokenClient(token), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), shown...)
	}
}

// TestInputRequiredAbandonedCallHoldsNoOneBack: on a shared 2025 backend
// (server-everything, and a fake server), a stateless client's call that
// got an InputRequiredResult and is never retried (abandoned, or retried
// with a tampered requestState) waits for its client; the backend's next
// request can only be another call's. A 2025 session's and another
// stateless client's calls that ask for input get their own questions,
// never the abandoned call's, and complete; the abandoned call is
// cancelled at the backend after its input_retry_timeout.
func TestInputRequiredAbandonedCallHoldsNoOneBack(t *testing.T) {
	gw := sharedInputGateway(t)
	testutil.Eventually(t, 60*time.Second, "server-everything's conditional tools", func() bool {
		a := gw.call(t, aliceToken, 1, "everything__trigger-sampling-request", `{"prompt":"probe","maxTokens":5}`, `{}`, "")
		return a.Error == nil || !strings.Contains(a.raw, "unknown tool")
	})
	const sampleArgs = `{"prompt":%q,"maxTokens":5}`
	answer := `{"role":"assistant","content":{"type":"text","text":"from bob's model"},"model":"m"}`

	// alice's call asks, and alice never comes back.
	a := gw.call(t, aliceToken, 2, "everything__trigger-sampling-request", fmt.Sprintf(sampleArgs, "the secret of alice"), samplingCaps, "")
	mustInputRequired(t, a, "sampling/createMessage")

	session, shown := samplingSession(t, gw.d.URL, bobToken)
	check := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-sampling-request",
			Arguments: map[string]any{"prompt": "the prompt of bob's session", "maxTokens": 5}})
		if err != nil || res.IsError || !strings.Contains(testutil.ToolText(res), "from the session") {
			t.Errorf("%s: the 2025 session's call = %+v, %v; want its own sampling answer", when, res, err)
		}
	}
	check("while alice's call waits")

	// bob's stateless call gets its own question, and completes.
	b := gw.call(t, bobToken, 3, "everything__trigger-sampling-request", fmt.Sprintf(sampleArgs, "the prompt of bob"), samplingCaps, "")
	keys := mustInputRequired(t, b, "sampling/createMessage")
	if req := b.requests(t)[keys["sampling/createMessage"]]; !strings.Contains(string(req.Params), "the prompt of bob") {
		t.Errorf("bob was asked %s; want his own call's question", req.Params)
	}
	done := gw.call(t, bobToken, 4, "everything__trigger-sampling-request", fmt.Sprintf(sampleArgs, "the prompt of bob"), samplingCaps,
		retryParams(map[string]string{keys["sampling/createMessage"]: answer}, b.Result.RequestState))
	if done.Error != nil || done.Result.ResultType != "complete" || !strings.Contains(done.text(), "from bob's model") {
		t.Errorf("bob's retry: %s; want his call's result", done.raw)
	}

	// alice's retry is refused (tampered): her call still waits, and
	// holds nobody back.
	tampered, err := base64.RawURLEncoding.DecodeString(a.Result.RequestState)
	if err != nil || len(tampered) < 40 {
		t.Fatalf("requestState %q: %v", a.Result.RequestState, err)
	}
	tampered[len(tampered)-20] ^= 0x01
	r := gw.call(t, aliceToken, 5, "everything__trigger-sampling-request", fmt.Sprintf(sampleArgs, "the secret of alice"), samplingCaps,
		retryParams(map[string]string{"sampling-1": answer}, base64.RawURLEncoding.EncodeToString(tampered)))
	mustRefuse(t, r, "tampered")
	check("after alice's refused retry")
	for _, s := range shown() {
		if strings.Contains(s, "alice") {
			t.Errorf("bob's session was shown %s", s)
		}
	}

	// An abandoned call costs its backend input_retry_timeout (3 s on
	// fake): then it is cancelled, and its request answered with -32001.
	f := gw.call(t, aliceToken, 6, "fake__sample", `{}`, samplingCaps, "")
	mustInputRequired(t, f, "sampling/createMessage")
	sent := awaitRecorded(t, gw.fakeRecord, "alice's tools/call at fake", `"method":"tools/call"`, `"name":"sample"`)
	var call struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal([]byte(sent), &call)
	g := gw.call(t, bobToken, 7, "fake__sample", `{}`, samplingCaps, "")
	mustInputRequired(t, g, "sampling/createMessage")
	awaitRecorded(t, gw.fakeRecord, "the cancellation of alice's call", `"notifications/cancelled"`, `"requestId":`+string(call.ID))
	awaitRecorded(t, gw.fakeRecord, "the timeout of its sampling request", "-32001", "input_retry_timeout")
}
