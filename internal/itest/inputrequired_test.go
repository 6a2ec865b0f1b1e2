package itest

import (
	"bufio"
	"context"
	"encoding/base64"
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

// Tokens of the clients of inputGateway.
const (
	aliceToken = "mcpgate_itest_alice_0123456789"
	bobToken   = "mcpgate_itest_bob_0123456789"
	carolToken = "mcpgate_itest_carol_0123456789"
)

// inputGW is a gateway whose backends, speaking 2025-11-25, send requests
// to their client mid-call, with the files where the fake ones record
// every line they read.
type inputGW struct {
	d                       *testutil.Daemon
	fakeRecord, shortRecord string
}

// inputGateway runs mcpgated with two clients, alice and bob, and three
// backends: fake and short (fake servers recording what they read; short
// waits 300ms for a client's input) and everything (server-everything).
func inputGateway(t *testing.T) *inputGW { return inputGatewayWith(t, "") }

// inputGatewayWith is inputGateway with more [gateway] keys.
func inputGatewayWith(t *testing.T, gatewayKeys string) *inputGW {
	t.Helper()
	bins := testutil.Build(t)
	dir := t.TempDir()
	gw := &inputGW{fakeRecord: filepath.Join(dir, "fake.jsonl"), shortRecord: filepath.Join(dir, "short.jsonl")}
	backends := fmt.Sprintf(`
[backends.fake]
command = %[1]q
args = ["--record", %[2]q]

[backends.short]
command = %[1]q
args = ["--record", %[3]q]
client_request_timeout = "300ms"

[backends.everything]
command = %[4]q
args = ["stdio"]

[clients.alice]
token_sha256 = %[5]q

[clients.bob]
token_sha256 = %[6]q

[clients.carol]
token_sha256 = %[7]q
tools = ["fake__echo"]
`, bins.Fake, gw.fakeRecord, gw.shortRecord, testutil.NpmServer(t, "mcp-server-everything"), sha256Hex(aliceToken), sha256Hex(bobToken), sha256Hex(carolToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required", Gateway: "audit = \"calls\"\n" + gatewayKeys})
	gw.d = testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	return gw
}

// mrtrAnswer is a stateless request's answer.
type mrtrAnswer struct {
	status int
	raw    string
	Result struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
		Content       []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Reason string `json:"reason"`
		} `json:"data"`
	} `json:"error"`
}

// text is the text of a tool result's content.
func (a *mrtrAnswer) text() string {
	var parts []string
	for _, c := range a.Result.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// inputRequest is one member of inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (a *mrtrAnswer) requests(t *testing.T) map[string]inputRequest {
	t.Helper()
	out := map[string]inputRequest{}
	for k, raw := range a.Result.InputRequests {
		var r inputRequest
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("inputRequests[%q] = %s: %v", k, raw, err)
		}
		out[k] = r
	}
	return out
}

// call sends one stateless request of the client with token: a tools/call
// of tool with arguments, declaring caps, with extra params members
// (inputResponses, requestState) if not "".
func (gw *inputGW) call(t *testing.T, token string, id int, tool, args, caps, extra string) *mrtrAnswer {
	t.Helper()
	return gw.send(t, token, id, "tools/call", tool, fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args), caps, extra)
}

// send sends one stateless request of method for name (a tool, prompt or
// URI) with the params members params, declaring caps, with extra params
// members if not "".
func (gw *inputGW) send(t *testing.T, token string, id int, method, name, params, caps, extra string) *mrtrAnswer {
	t.Helper()
	if extra != "" {
		extra = "," + extra
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s},%s%s}}`,
		id, method, caps, params, extra)
	resp, raw := exchange(t, http.DefaultClient, gw.d.URL, body,
		"Authorization", "Bearer "+token, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Mcp-Name", name)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw = lastResponse(t, raw)
	}
	a := &mrtrAnswer{status: resp.StatusCode, raw: raw}
	if err := json.Unmarshal([]byte(raw), a); err != nil {
		t.Fatalf("%s %s: HTTP %d, not a JSON-RPC response: %v: %s", method, name, resp.StatusCode, err, raw)
	}
	return a
}

// lastResponse picks the JSON-RPC response out of an event stream.
func lastResponse(t *testing.T, stream string) string {
	t.Helper()
	var last string
	sc := bufio.NewScanner(strings.NewReader(stream))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id"`) && !strings.Contains(data, `"method"`) {
			last = data
		}
	}
	if last == "" {
		t.Fatalf("no response in the event stream:\n%s", stream)
	}
	return last
}

// retryParams are the members a retry adds: inputResponses and the
// requestState.
func retryParams(responses map[string]string, state string) string {
	var members []string
	for k, v := range responses {
		members = append(members, fmt.Sprintf("%q:%s", k, v))
	}
	return fmt.Sprintf(`"inputResponses":{%s},"requestState":%q`, strings.Join(members, ","), state)
}

// mustInputRequired checks that a is an InputRequiredResult with exactly
// the methods wanted (one request each) and returns its keys by method.
func mustInputRequired(t *testing.T, a *mrtrAnswer, methods ...string) map[string]string {
	t.Helper()
	if a.Error != nil || a.Result.ResultType != "input_required" || a.Result.RequestState == "" {
		t.Fatalf("HTTP %d %s; want an InputRequiredResult with requestState", a.status, a.raw)
	}
	keys := map[string]string{}
	for k, r := range a.requests(t) {
		keys[r.Method] = k
	}
	if len(keys) != len(methods) || len(a.Result.InputRequests) != len(methods) {
		t.Fatalf("inputRequests %s; want one request of each of %v", a.raw, methods)
	}
	for _, m := range methods {
		if keys[m] == "" {
			t.Fatalf("inputRequests %s; want one of method %s", a.raw, m)
		}
	}
	return keys
}

// mustRefuse checks that a is the -32602 error for requestState reason.
func mustRefuse(t *testing.T, a *mrtrAnswer, reason string) {
	t.Helper()
	if a.Error == nil || a.Error.Code != -32602 || a.Error.Data.Reason != reason || !strings.Contains(a.Error.Message, "requestState") {
		t.Errorf("HTTP %d %s; want error -32602 for a requestState that is %s", a.status, a.raw, reason)
	}
}

// fakeRecorded returns the lines a fake backend read.
func fakeRecorded(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// awaitRecorded waits until the backend recorded a line that contains
// every one of want.
func awaitRecorded(t *testing.T, file, what string, want ...string) string {
	t.Helper()
	var found string
	testutil.Eventually(t, 30*time.Second, what, func() bool {
		for _, line := range fakeRecorded(t, file) {
			if containsAll(line, want...) {
				found = line
				return true
			}
		}
		return false
	})
	return found
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// nothingReached checks that the backend read nothing between the line
// count before and a marker call after: requests reach a stdio backend in
// order, so what a refused retry sent would be recorded before the marker.
func (gw *inputGW) nothingReached(t *testing.T, file, tool string, before int, marker string) {
	t.Helper()
	a := gw.call(t, aliceToken, 900, tool, fmt.Sprintf(`{"text":%q}`, marker), `{}`, "")
	if a.Error != nil || !strings.Contains(a.text(), marker) {
		t.Fatalf("marker call: %s", a.raw)
	}
	lines := fakeRecorded(t, file)
	for _, line := range lines[before:] {
		if strings.Contains(line, marker) {
			return
		}
		t.Errorf("the backend read %s after a refused retry; want nothing before the marker", line)
	}
}

const samplingCaps = `{"sampling":{}}`

// TestInputRequiredFromServerEverything: server-everything, a 2025-11-25
// server, sends sampling/createMessage and elicitation/create mid-call;
// a stateless client gets each as an InputRequiredResult and its retry's
// answers reach the server, whose tool result comes back to the retry.
func TestInputRequiredFromServerEverything(t *testing.T) {
	gw := inputGateway(t)
	testutil.Eventually(t, 60*time.Second, "server-everything's conditional tools", func() bool {
		a := gw.call(t, aliceToken, 1, "everything__trigger-sampling-request", `{"prompt":"probe","maxTokens":5}`, `{}`, "")
		return a.Error == nil || !strings.Contains(a.raw, "unknown tool")
	})

	t.Run("sampling", func(t *testing.T) {
		a := gw.call(t, aliceToken, 2, "everything__trigger-sampling-request", `{"prompt":"the prompt of alice","maxTokens":20}`, samplingCaps, "")
		keys := mustInputRequired(t, a, "sampling/createMessage")
		if req := a.requests(t)[keys["sampling/createMessage"]]; !strings.Contains(string(req.Params), "the prompt of alice") {
			t.Errorf("sampling params %s; want the server's own, with the prompt", req.Params)
		}
		answer := `{"role":"assistant","content":{"type":"text","text":"the answer of alice's model"},"model":"itest-model","stopReason":"endTurn"}`
		b := gw.call(t, aliceToken, 3, "everything__trigger-sampling-request", `{"prompt":"the prompt of alice","maxTokens":20}`, samplingCaps,
			retryParams(map[string]string{keys["sampling/createMessage"]: answer}, a.Result.RequestState))
		if b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(b.text(), "the answer of alice's model") {
			t.Errorf("retry: HTTP %d %s; want the tool's result with the client's sampling answer", b.status, b.raw)
		}
	})

	t.Run("elicitation", func(t *testing.T) {
		caps := `{"elicitation":{"form":{}}}`
		a := gw.call(t, aliceToken, 4, "everything__trigger-elicitation-request", `{}`, caps, "")
		keys := mustInputRequired(t, a, "elicitation/create")
		b := gw.call(t, aliceToken, 5, "everything__trigger-elicitation-request", `{}`, caps,
			retryParams(map[string]string{keys["elicitation/create"]: `{"action":"decline"}`}, a.Result.RequestState))
		if b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(strings.ToLower(b.text()), "decline") {
			t.Errorf("retry: HTTP %d %s; want the tool's result for a declined elicitation", b.status, b.raw)
		}
	})
}

// TestInputRequiredRootsAndSeveralAtOnce: roots/list becomes an input
// request too, and requests a backend has in flight together all reach
// the client and are all answered.
func TestInputRequiredRootsAndSeveralAtOnce(t *testing.T) {
	gw := inputGateway(t)

	a := gw.call(t, aliceToken, 1, "fake__roots", `{}`, `{"roots":{}}`, "")
	keys := mustInputRequired(t, a, "roots/list")
	roots := `{"roots":[{"uri":"file:///home/alice/project","name":"project"}]}`
	b := gw.call(t, aliceToken, 2, "fake__roots", `{}`, `{"roots":{}}`, retryParams(map[string]string{keys["roots/list"]: roots}, a.Result.RequestState))
	if b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(string(b.Result.StructuredContent), "file:///home/alice/project") {
		t.Fatalf("roots retry: HTTP %d %s; want the backend to have the client's roots", b.status, b.raw)
	}

	// Two requests in flight at once: the client may get them in one
	// InputRequiredResult or in two, and answers each.
	args := `{"requests":[{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}},{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}]}`
	caps := `{"sampling":{},"elicitation":{}}`
	answers := map[string]string{
		"sampling/createMessage": `{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}`,
		"elicitation/create":     `{"action":"accept","content":{"name":"alice"}}`,
	}
	seen := map[string]bool{}
	res := gw.call(t, aliceToken, 3, "fake__requests", args, caps, "")
	for id := 4; res.Result.ResultType == "input_required"; id++ {
		if id > 8 {
			t.Fatalf("still input_required after %d retries: %s", id-4, res.raw)
		}
		responses := map[string]string{}
		for k, r := range res.requests(t) {
			if seen[r.Method] {
				t.Errorf("%s asked again after it was answered: %s", r.Method, res.raw)
			}
			seen[r.Method] = true
			responses[k] = answers[r.Method]
		}
		res = gw.call(t, aliceToken, id, "fake__requests", args, caps, retryParams(responses, res.Result.RequestState))
	}
	want := `{"answers":[{"result":` + answers["sampling/createMessage"] + `},{"result":` + answers["elicitation/create"] + `}]}`
	if res.Error != nil || res.Result.ResultType != "complete" || compactJSON(t, res.Result.StructuredContent) != compactJSON(t, []byte(want)) {
		t.Errorf("final answer HTTP %d %s; want structuredContent %s", res.status, res.raw, want)
	}

	// 33 at once: at most 32 wait for the client, the one beyond is
	// refused to the backend, whatever the rounds.
	many := make([]string, 33)
	for i := range many {
		many[i] = `{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`
	}
	args = `{"requests":[` + strings.Join(many, ",") + `]}`
	res = gw.call(t, aliceToken, 20, "fake__requests", args, samplingCaps, "")
	// The client holds the first InputRequiredResult until the backend got
	// the refusal: had it answered first, 32 could have fit.
	awaitRecorded(t, gw.fakeRecord, "the refusal of the 33rd request", `"error"`, "32 requests of this call already wait for the client")
	for id := 21; res.Result.ResultType == "input_required"; id++ {
		if id > 60 {
			t.Fatalf("still input_required after %d retries: %s", id-21, res.raw)
		}
		responses := map[string]string{}
		for k := range res.requests(t) {
			responses[k] = answers["sampling/createMessage"]
		}
		res = gw.call(t, aliceToken, id, "fake__requests", args, samplingCaps, retryParams(responses, res.Result.RequestState))
	}
	var got struct {
		Answers []struct {
			Result json.RawMessage `json:"result"`
			Error  struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"answers"`
	}
	json.Unmarshal(res.Result.StructuredContent, &got)
	refused := 0
	for _, a := range got.Answers {
		if strings.Contains(a.Error.Message, "32 requests of this call already wait for the client") {
			refused++
		}
	}
	if len(got.Answers) != 33 || refused != 1 {
		t.Errorf("33 requests at once: %d answers, %d refused for the bound; want 33 and 1: %s", len(got.Answers), refused, res.raw)
	}
}

func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestInputRequiredRefusals: a requestState that is tampered with, sent
// by another client, for another tool, used twice or expired is refused
// with -32602, journaled, and reaches no backend; an expired call is
// cancelled at its backend, whose request gets an error; a capability the
// client did not declare is never asked for; the retry is audited.
func TestInputRequiredRefusals(t *testing.T) {
	gw := inputGateway(t)
	args := `{}`
	a := gw.call(t, aliceToken, 1, "fake__sample", args, samplingCaps, "")
	keys := mustInputRequired(t, a, "sampling/createMessage")
	key, state := keys["sampling/createMessage"], a.Result.RequestState
	answer := `{"role":"assistant","content":{"type":"text","text":"from alice"},"model":"m"}`
	responses := map[string]string{key: answer}

	before := len(fakeRecorded(t, gw.fakeRecord))
	// One bit of the sealed part flipped, still valid base64url: a
	// client that inspects and alters what it must not.
	tampered, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil || len(tampered) < 40 {
		t.Fatalf("requestState %q is not the base64url of a sealed token: %v", state, err)
	}
	tampered[len(tampered)-20] ^= 0x01
	mustRefuse(t, gw.call(t, aliceToken, 2, "fake__sample", args, samplingCaps, retryParams(responses, base64.RawURLEncoding.EncodeToString(tampered))), "tampered")
	mustRefuse(t, gw.call(t, bobToken, 3, "fake__sample", args, samplingCaps, retryParams(responses, state)), "other-client")
	mustRefuse(t, gw.call(t, aliceToken, 4, "fake__elicit", args, samplingCaps, retryParams(responses, state)), "other-request")
	// The policy comes first: carol may not use fake__sample, whatever
	// requestState she brings.
	if c := gw.call(t, carolToken, 5, "fake__sample", args, samplingCaps, retryParams(responses, state)); c.Error == nil || !strings.Contains(c.Error.Message, `unknown tool "fake__sample"`) {
		t.Errorf("carol retrying fake__sample: %s; want the unknown-tool error of her policy", c.raw)
	}
	mustRefuse(t, gw.call(t, aliceToken, 5, "fake__sample", args, samplingCaps, retryParams(responses, "bm90IGEgdG9rZW4")), "malformed")
	gw.nothingReached(t, gw.fakeRecord, "fake__echo", before, "marker-after-refusals")

	// A retry that answers nothing is asked again, under a new
	// requestState; the old one is used up.
	again := gw.call(t, aliceToken, 6, "fake__sample", args, samplingCaps, retryParams(nil, state))
	if k := mustInputRequired(t, again, "sampling/createMessage")["sampling/createMessage"]; k != key || again.Result.RequestState == state {
		t.Fatalf("retry without answers: %s; want %s asked again under a new requestState", again.raw, key)
	}
	mustRefuse(t, gw.call(t, aliceToken, 7, "fake__sample", args, samplingCaps, retryParams(responses, state)), "replayed")
	state = again.Result.RequestState

	// The real retry works after those, once.
	b := gw.call(t, aliceToken, 8, "fake__sample", args, samplingCaps, retryParams(responses, state))
	if b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(string(b.Result.StructuredContent), "from alice") {
		t.Fatalf("retry: %s; want the backend's result with alice's answer", b.raw)
	}
	// Each retry is audited when it is answered, and the first request
	// when the backend's call ends: three entries; the refused retries
	// have none.
	audits := func(out string) (n int) {
		for _, line := range strings.Split(out, "\n") {
			if containsAll(line, "message_id=af84f9ba2bdf44638ea8e737adfb73ba", "client=alice", "tool=fake__sample", "outcome=ok") {
				n++
			}
		}
		return n
	}
	gw.d.Stderr.Await(t, 10*time.Second, "the audit entries of the request and its two retries", func(out string) bool { return audits(out) >= 3 })
	defer func() {
		if n := audits(gw.d.Stderr.String()); n != 3 {
			t.Errorf("%d audit entries of alice's fake__sample, want 3: the request and its two answered retries", n)
		}
	}()
	before = len(fakeRecorded(t, gw.fakeRecord))
	mustRefuse(t, gw.call(t, aliceToken, 9, "fake__sample", args, samplingCaps, retryParams(responses, state)), "replayed")
	gw.nothingReached(t, gw.fakeRecord, "fake__echo", before, "marker-after-replay")
	gw.d.Stderr.Await(t, 10*time.Second, "the journaled refusals", func(out string) bool {
		return containsAll(out, `refused client \"bob\": tools/call with requestState other-client`,
			`refused client \"alice\": tools/call with requestState tampered`, `refused client \"alice\": tools/call with requestState replayed`)
	})

	// Expiry: short waits 300ms for the retry, then cancels the call at
	// the backend and answers its request with an error.
	e := gw.call(t, aliceToken, 10, "short__sample", args, samplingCaps, "")
	eKey := mustInputRequired(t, e, "sampling/createMessage")["sampling/createMessage"]
	call := awaitRecorded(t, gw.shortRecord, "the short backend's tools/call", `"method":"tools/call"`, `"name":"sample"`)
	var sent struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal([]byte(call), &sent)
	awaitRecorded(t, gw.shortRecord, "the error answering the backend's sampling request", `"error"`, `-32001`, "did not retry")
	awaitRecorded(t, gw.shortRecord, "notifications/cancelled of the expired call", `"notifications/cancelled"`, `"requestId":`+string(sent.ID))
	before = len(fakeRecorded(t, gw.shortRecord))
	mustRefuse(t, gw.call(t, aliceToken, 11, "short__sample", args, samplingCaps, retryParams(map[string]string{eKey: answer}, e.Result.RequestState)), "expired")
	gw.nothingReached(t, gw.shortRecord, "short__echo", before, "marker-after-expiry")

	// A capability the client did not declare: the backend gets an error,
	// the client no input request but -32021 naming what it lacks.
	u := gw.call(t, aliceToken, 12, "fake__elicit", args, samplingCaps, "")
	if u.Error == nil || u.Error.Code != -32021 || u.status != http.StatusBadRequest || !strings.Contains(u.raw, `"elicitation"`) {
		t.Errorf("elicitation without the capability: HTTP %d %s; want 400 with -32021 naming elicitation", u.status, u.raw)
	}
	awaitRecorded(t, gw.fakeRecord, "the error answering the backend's elicitation", `"error"`, "did not declare the capability elicitation/create needs")
}

// TestInputRequiredElsewhereAndBounded: a requestState brought to another
// mcpgated (here on the same host, as after a restart) is refused with
// reason restarted and reaches no backend there; beyond
// max_input_required_calls_per_client, a backend's request is answered
// with an error naming the key instead of becoming an input request.
func TestInputRequiredElsewhereAndBounded(t *testing.T) {
	one := inputGatewayWith(t, "max_input_required_calls_per_client = 1")
	other := inputGatewayWith(t, "")

	a := one.call(t, aliceToken, 1, "fake__sample", `{}`, samplingCaps, "")
	key := mustInputRequired(t, a, "sampling/createMessage")["sampling/createMessage"]
	answer := `{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}`
	before := len(fakeRecorded(t, other.fakeRecord))
	r := other.call(t, aliceToken, 2, "fake__sample", `{}`, samplingCaps, retryParams(map[string]string{key: answer}, a.Result.RequestState))
	mustRefuse(t, r, "restarted")
	if r.Error != nil && !strings.Contains(r.Error.Message, "another run of mcpgated on host") {
		t.Errorf("refusal %q does not say another run of mcpgated issued it", r.Error.Message)
	}
	other.nothingReached(t, other.fakeRecord, "fake__echo", before, "marker-elsewhere")

	// alice's one call waits on fake: her next call that asks, on short
	// (not fake, where two calls in flight could not be told apart), is
	// over the bound.
	b := one.call(t, aliceToken, 3, "short__sample", `{}`, samplingCaps, "")
	if b.Error != nil || b.Result.ResultType == "input_required" || !b.Result.IsError || !strings.Contains(b.raw, "max_input_required_calls_per_client") {
		t.Errorf("a second waiting call of alice: %s; want the backend's error result naming max_input_required_calls_per_client", b.raw)
	}
	// bob has a bound of his own.
	c := one.call(t, bobToken, 4, "short__sample", `{}`, samplingCaps, "")
	mustInputRequired(t, c, "sampling/createMessage")

	// Stopping the gateway ends alice's waiting call at once, as a
	// draining gateway would refuse her retry: no drain timeout, the call
	// cancelled and the backend's request answered with -32003.
	sent := awaitRecorded(t, one.fakeRecord, "alice's tools/call at fake", `"method":"tools/call"`, `"name":"sample"`)
	var call struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal([]byte(sent), &call)
	one.d.Terminate(t)
	if strings.Contains(one.d.Stderr.String(), "drain timeout reached") {
		t.Errorf("the gateway waited for a call whose client holds an InputRequiredResult until drain_timeout")
	}
	lines := strings.Join(fakeRecorded(t, one.fakeRecord), "\n")
	if !containsAll(lines, `"notifications/cancelled"`, `"requestId":`+string(call.ID)) || !containsAll(lines, "-32003", "shutting down") {
		t.Errorf("after the gateway stopped, the backend read:\n%s\nwant notifications/cancelled of call %s and -32003 for its request", lines, call.ID)
	}
}

// TestInputRequiredRetryClosed: a client that closes its retry's stream
// while the backend's call goes on cancels the call at the backend, as
// for any stateless request.
func TestInputRequiredRetryClosed(t *testing.T) {
	gw := inputGateway(t)
	args := `{"requests":[{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}],"wait_cancel":true}`
	a := gw.call(t, aliceToken, 1, "fake__requests", args, samplingCaps, "")
	key := mustInputRequired(t, a, "sampling/createMessage")["sampling/createMessage"]
	call := awaitRecorded(t, gw.fakeRecord, "the backend's tools/call", `"method":"tools/call"`, `"name":"requests"`)
	var sent struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal([]byte(call), &sent)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s},"name":"fake__requests","arguments":%s,%s}}`,
			samplingCaps, args, retryParams(map[string]string{key: `{"role":"assistant","content":{"type":"text","text":"answered then gone"},"model":"m"}`}, a.Result.RequestState))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.d.URL, strings.NewReader(body))
		for h := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream", "Authorization", "Bearer " + aliceToken,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "fake__requests"}; len(h) > 1; h = h[2:] {
			req.Header.Set(h[0], h[1])
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	awaitRecorded(t, gw.fakeRecord, "the client's answer at the backend", `"result"`, "answered then gone")
	cancel()
	<-done
	awaitRecorded(t, gw.fakeRecord, "notifications/cancelled of the call whose retry was closed", `"notifications/cancelled"`, `"requestId":`+string(sent.ID))
}

// TestInputRequiredPromptAndResource: prompts/get and resources/read may
// ask too; the requestState is bound to the prompt or the URI.
func TestInputRequiredPromptAndResource(t *testing.T) {
	bins := testutil.Build(t)
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.fake]
command = %q
args = ["--prompts", "--resources", "1"]

[clients.alice]
token_sha256 = %q
`, bins.Fake, sha256Hex(aliceToken)), testutil.ConfigOptions{Auth: "required"})
	gw := &inputGW{d: testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})}

	prompt := `"name":"fake__greet","arguments":{"name":"x","ask":"elicitation"}`
	a := gw.send(t, aliceToken, 1, "prompts/get", "fake__greet", prompt, `{"elicitation":{}}`, "")
	key := mustInputRequired(t, a, "elicitation/create")["elicitation/create"]
	retry := retryParams(map[string]string{key: `{"action":"accept","content":{"name":"Grace"}}`}, a.Result.RequestState)
	b := gw.send(t, aliceToken, 2, "prompts/get", "fake__greet", prompt, `{"elicitation":{}}`, retry)
	if b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(b.raw, "Grace") {
		t.Errorf("prompts/get retry: HTTP %d %s; want the prompt greeting with the client's answer", b.status, b.raw)
	}

	read := `"uri":"fake://ask/roots"`
	c := gw.send(t, aliceToken, 3, "resources/read", "fake://ask/roots", read, `{"roots":{}}`, "")
	key = mustInputRequired(t, c, "roots/list")["roots/list"]
	// The requestState of the read does not continue another URI.
	other := gw.send(t, aliceToken, 4, "resources/read", "fake://r/0", `"uri":"fake://r/0"`, `{"roots":{}}`,
		retryParams(map[string]string{key: `{"roots":[]}`}, c.Result.RequestState))
	mustRefuse(t, other, "other-request")
	d := gw.send(t, aliceToken, 5, "resources/read", "fake://ask/roots", read, `{"roots":{}}`,
		retryParams(map[string]string{key: `{"roots":[{"uri":"file:///srv/grace"}]}`}, c.Result.RequestState))
	if d.Error != nil || d.Result.ResultType != "complete" || !strings.Contains(d.raw, "file:///srv/grace") {
		t.Errorf("resources/read retry: HTTP %d %s; want the contents with the client's roots", d.status, d.raw)
	}
}

// TestInputRequiredThroughRemote: a remote backend (another mcpgate that
// runs the fake server, reached over Streamable HTTP as a 2025-11-25
// session) asks mid-call; the stateless client of this gateway gets the
// InputRequiredResult, and its retry's answer travels back through the
// remote's session to the fake server.
func TestInputRequiredThroughRemote(t *testing.T) {
	remote := gateway(t, `
[backends.fake]
command = "FAKE"
`)
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.remote]
url = %q

[clients.alice]
token_sha256 = %q
`, remote.URL, sha256Hex(aliceToken)), testutil.ConfigOptions{Auth: "required"})
	gw := &inputGW{d: testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})}
	testutil.Eventually(t, wait, "the remote's tools", func() bool {
		return gw.call(t, aliceToken, 1, "remote__fake__echo", `{"text":"up"}`, `{}`, "").Error == nil
	})

	a := gw.call(t, aliceToken, 2, "remote__fake__sample", `{}`, samplingCaps, "")
	key := mustInputRequired(t, a, "sampling/createMessage")["sampling/createMessage"]
	b := gw.call(t, aliceToken, 3, "remote__fake__sample", `{}`, samplingCaps,
		retryParams(map[string]string{key: `{"role":"assistant","content":{"type":"text","text":"over two hops"},"model":"m"}`}, a.Result.RequestState))
	if b.Error != nil || b.Result.ResultType != "complete" || !strings.Contains(string(b.Result.StructuredContent), "over two hops") {
		t.Errorf("retry through the remote: HTTP %d %s; want the fake server's result with the client's answer", b.status, b.raw)
	}
}
