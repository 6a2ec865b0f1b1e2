package gateway_test

// These tests drive the real mcpgated with fake backends through the
// official Go SDK client, and through raw HTTP where the SDK hides what is
// checked (exact capabilities, event order, batches, cursors).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// wait is the deadline for anything a test awaits.
const wait = 30 * time.Second

// fakeBackend returns the config section of a fake server backend called
// name, with extra TOML lines and fakeserver flags.
func fakeBackend(t *testing.T, name, extra string, flags ...string) string {
	args := append([]string{"--name", name}, flags...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf("[backends.%s]\ncommand = %q\nargs = [%s]\n%s\n\n", name, testutil.Build(t).Fake, strings.Join(quoted, ", "), extra)
}

// startGateway runs mcpgated with the given backends and [gateway] lines.
func startGateway(t *testing.T, gatewayLines string, backends ...string) *testutil.Daemon {
	t.Helper()
	toml, url := testutil.Config(t, strings.Join(backends, ""))
	toml = strings.Replace(toml, "[gateway]\n", "[gateway]\n"+gatewayLines, 1)
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
}

// connect opens a go-sdk session whose requests and notifications are
// recorded in ev; roots are the client's roots.
func connect(t *testing.T, d *testutil.Daemon, ev *testutil.ClientEvents, opts *mcp.ClientOptions, roots ...string) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = ev.ClientOptions()
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "client-" + ev.Name, Version: "1"}, opts)
	for _, r := range roots {
		client.AddRoots(&mcp.Root{URI: r})
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.URL, HTTPClient: &http.Client{}, MaxRetries: -1}, testutil.LegacySession())
	if err != nil {
		t.Fatalf("connect %s to %s: %v", ev.Name, d.URL, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and fails the test on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := callToolErr(cs, name, args, nil)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func callToolErr(cs *mcp.ClientSession, name string, args any, token any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		params.SetProgressToken(token)
	}
	return cs.CallTool(ctx, params)
}

// structured returns the structuredContent of a fakeserver result.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("result has no structuredContent object: %+v (text %q)", res.StructuredContent, testutil.ToolText(res))
	}
	return m
}

// recordFile returns a path for a fakeserver --record file.
func recordFile(t *testing.T, name string) string {
	return t.TempDir() + "/" + name + ".record"
}

// recorded returns the lines a fakeserver read so far.
func recorded(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// recordedInitialize returns the initialize request a fakeserver read (it
// follows the server/discover probe).
func recordedInitialize(t *testing.T, path string) string {
	t.Helper()
	for _, line := range recorded(t, path) {
		if strings.Contains(line, `"method":"initialize"`) {
			return line
		}
	}
	t.Fatalf("%s holds no initialize request", path)
	return ""
}

// awaitRecorded waits until a fakeserver has read n lines containing each
// of parts, and returns them. A backend's input has no event to wait on.
func awaitRecorded(t *testing.T, path string, n int, parts ...string) []string {
	t.Helper()
	var got []string
	testutil.Eventually(t, wait, fmt.Sprintf("%d lines with %q in %s", n, parts, path), func() bool {
		got = nil
		for _, line := range recorded(t, path) {
			if containsAll(line, parts...) {
				got = append(got, line)
			}
		}
		return len(got) >= n
	})
	return got
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// backendID returns the id of a request line a backend read.
func backendID(t *testing.T, line string) string {
	t.Helper()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.ID == nil {
		t.Fatalf("no id in recorded line %s: %v", line, err)
	}
	return string(m.ID)
}

// cancellations returns the notifications/cancelled a fakeserver received,
// as requestId → reason.
func cancellations(t *testing.T, cs *mcp.ClientSession, tool string) map[string]string {
	t.Helper()
	res := callTool(t, cs, tool, nil)
	var list []struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	raw, _ := json.Marshal(structured(t, res)["cancelled"])
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("cancelled: %v in %s", err, raw)
	}
	out := map[string]string{}
	for _, c := range list {
		out[string(c.RequestID)] = c.Reason
	}
	return out
}

// awaitCancelled waits until the backend behind tool got
// notifications/cancelled for the request id, and returns the reason.
func awaitCancelled(t *testing.T, cs *mcp.ClientSession, tool, id string) string {
	t.Helper()
	var reason string
	testutil.Eventually(t, wait, "notifications/cancelled for backend request "+id, func() bool {
		r, ok := cancellations(t, cs, tool)[id]
		reason = r
		return ok
	})
	return reason
}

// --- raw HTTP ----------------------------------------------------------

// rawSession is an MCP session spoken over plain HTTP.
type rawSession struct {
	t        *testing.T
	url      string
	id       string
	protocol string
	result   map[string]any // the initialize result
}

// rawInit starts a session with the given protocol version.
func rawInit(t *testing.T, url, protocol string, caps string) *rawSession {
	t.Helper()
	s := &rawSession{t: t, url: url, protocol: protocol}
	resp := s.post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":%s,"clientInfo":{"name":"raw","version":"1"}}}`, protocol, caps))
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: HTTP %d: %s", resp.StatusCode, body)
	}
	var msg struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Result == nil {
		t.Fatalf("initialize: %v: %s", err, body)
	}
	s.id = resp.Header.Get(mcphttp.HeaderSession)
	s.result = msg.Result
	s.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// do sends a request to the endpoint with the session's headers.
func (s *rawSession) do(ctx context.Context, method, body string, header ...string) *http.Response {
	s.t.Helper()
	// Bound every exchange, so that a stream that never ends fails the test.
	ctx, cancel := context.WithTimeout(ctx, wait)
	s.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Accept", mcphttp.AcceptPost)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.id != "" {
		req.Header.Set(mcphttp.HeaderSession, s.id)
		req.Header.Set(mcphttp.HeaderProtocol, s.protocol)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		s.t.Fatalf("%s %s: %v", method, s.url, err)
	}
	return resp
}

func (s *rawSession) post(ctx context.Context, body string) *http.Response {
	s.t.Helper()
	return s.do(ctx, http.MethodPost, body)
}

// notify posts a notification or response and expects 202.
func (s *rawSession) notify(body string) {
	s.t.Helper()
	resp := s.post(context.Background(), body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("posting %s: HTTP %d, want 202: %s", body, resp.StatusCode, b)
	}
}

// message is a JSON-RPC message as a test inspects it.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, data string) message {
	t.Helper()
	var m message
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return m
}

// --- tests ---------------------------------------------------------------

// The initialize result advertises what the healthy backends provide, with
// listChanged, and their instructions labelled by backend; a failed
// backend contributes nothing.
func TestInitializeAdvertisesHealthyBackends(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		backends     []string
		caps         string
		instructions string
	}{
		{
			name: "failed backend left out",
			backends: []string{
				fakeBackend(t, "plain", "", "--instructions", "plain helps"),
				fakeBackend(t, "dead", "max_restarts = 0", "--prompts", "--resources", "1", "--instructions", "dead helps", "--exit-at-start", "3"),
			},
			caps:         `{"tools":{"listChanged":true},"logging":{}}`,
			instructions: "## plain\nplain helps",
		},
		{
			name: "union of healthy backends",
			backends: []string{
				fakeBackend(t, "plain", "", "--instructions", "plain helps"),
				fakeBackend(t, "rich", "", "--prompts", "--resources", "2", "--instructions", "rich helps\n"),
			},
			caps:         `{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"logging":{},"completions":{}}`,
			instructions: "## plain\nplain helps\n\n## rich\nrich helps",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := startGateway(t, "", tt.backends...)
			s := rawInit(t, d.URL, "2025-11-25", "{}")
			var want map[string]any
			json.Unmarshal([]byte(tt.caps), &want)
			got, _ := json.Marshal(s.result["capabilities"])
			wantJSON, _ := json.Marshal(want)
			if string(got) != string(wantJSON) {
				t.Errorf("capabilities = %s, want %s", got, wantJSON)
			}
			if s.result["instructions"] != tt.instructions {
				t.Errorf("instructions = %q, want %q", s.result["instructions"], tt.instructions)
			}
			if s.result["protocolVersion"] != "2025-11-25" {
				t.Errorf("protocolVersion = %v", s.result["protocolVersion"])
			}
		})
	}
}

// Requests a backend sends to its client go to the session whose call is in
// flight there, or are refused with an error that says why.
func TestClientRequestRouting(t *testing.T) {
	t.Parallel()
	cfgRecord, noRecord, lessRecord := recordFile(t, "cfgroots"), recordFile(t, "norelay"), recordFile(t, "less")
	d := startGateway(t, "",
		fakeBackend(t, "f", ""),
		fakeBackend(t, "cfgroots", `roots = ["file:///srv/data", "file:///srv/more"]`, "--record", cfgRecord),
		fakeBackend(t, "norelay", "relay_client_requests = false", "--record", noRecord),
		fakeBackend(t, "less", `client_capabilities = ["roots"]`, "--record", lessRecord),
	)
	evA, evB := testutil.NewClientEvents("A"), testutil.NewClientEvents("B")
	a := connect(t, d, evA, nil, "file:///client/a")
	b := connect(t, d, evB, nil, "file:///client/b")

	t.Run("sampling and elicitation reach the caller only", func(t *testing.T) {
		res := callTool(t, a, "f__sample", nil)
		if res.IsError || !strings.Contains(testutil.ToolText(res), "from A") {
			t.Errorf("A's f__sample = %q (isError %v), want the answer of A's sampling handler", testutil.ToolText(res), res.IsError)
		}
		res = callTool(t, b, "f__elicit", nil)
		if res.IsError || !strings.Contains(testutil.ToolText(res), `"name":"B"`) {
			t.Errorf("B's f__elicit = %q (isError %v), want the answer of B's elicitation handler", testutil.ToolText(res), res.IsError)
		}
		if n := evA.Count(testutil.Method("sampling/createMessage")); n != 1 {
			t.Errorf("A's sampling handler ran %d times, want 1", n)
		}
		if n := evA.Count(testutil.Method("elicitation/create")); n != 0 {
			t.Errorf("A's elicitation handler ran %d times for B's call", n)
		}
		if n := evB.Count(testutil.Method("sampling/createMessage")); n != 0 {
			t.Errorf("B's sampling handler ran %d times for A's call", n)
		}
		if n := evB.Count(testutil.Method("elicitation/create")); n != 1 {
			t.Errorf("B's elicitation handler ran %d times, want 1", n)
		}
	})

	t.Run("roots come from the caller", func(t *testing.T) {
		for _, c := range []struct {
			cs        *mcp.ClientSession
			want, not string
		}{{a, "file:///client/a", "file:///client/b"}, {b, "file:///client/b", "file:///client/a"}} {
			got := testutil.ToolText(callTool(t, c.cs, "f__roots", nil))
			if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
				t.Errorf("f__roots = %s, want %s and not %s", got, c.want, c.not)
			}
		}
	})

	t.Run("roots from config", func(t *testing.T) {
		res := callTool(t, a, "cfgroots__roots", nil)
		want := `{"roots":[{"uri":"file:///srv/data"},{"uri":"file:///srv/more"}]}`
		if got := testutil.ToolText(res); got != want {
			t.Errorf("cfgroots__roots = %s, want %s", got, want)
		}
		init := recordedInitialize(t, cfgRecord)
		if !strings.Contains(init, `"roots":{"listChanged":false}`) || !strings.Contains(init, `"sampling":{}`) {
			t.Errorf("initialize sent to cfgroots = %s; want roots without listChanged, and sampling", init)
		}
	})

	t.Run("relay_client_requests = false", func(t *testing.T) {
		for _, tool := range []string{"norelay__sample", "norelay__elicit", "norelay__roots"} {
			res := callTool(t, a, tool, nil)
			if !res.IsError || !strings.Contains(testutil.ToolText(res), "relay_client_requests = false") {
				t.Errorf("%s = %q (isError %v), want an error naming relay_client_requests = false", tool, testutil.ToolText(res), res.IsError)
			}
		}
		init := recordedInitialize(t, noRecord)
		if !strings.Contains(init, `"capabilities":{}`) {
			t.Errorf("initialize sent to norelay = %s; want no client capabilities", init)
		}
		// A ping from the backend is answered by the gateway itself.
		res := callTool(t, a, "norelay__request", map[string]any{"method": "ping"})
		if res.IsError || testutil.ToolText(res) != "{}" {
			t.Errorf("norelay ping = %q (isError %v), want {}", testutil.ToolText(res), res.IsError)
		}
	})

	// client_capabilities declares less: what is left out is not
	// declared at initialize, and a request for it is refused by the
	// gateway whatever the backend does, while roots still reach the
	// client.
	t.Run("client_capabilities", func(t *testing.T) {
		init := recordedInitialize(t, lessRecord)
		if !strings.Contains(init, `"capabilities":{"roots":{"listChanged":true}}`) {
			t.Errorf("initialize sent to less = %s; want roots only", init)
		}
		for _, tool := range []string{"less__sample", "less__elicit"} {
			res := callTool(t, a, tool, nil)
			if !res.IsError || !strings.Contains(testutil.ToolText(res), "(client_capabilities)") {
				t.Errorf("%s = %q (isError %v), want an error naming client_capabilities", tool, testutil.ToolText(res), res.IsError)
			}
		}
		if got := testutil.ToolText(callTool(t, a, "less__roots", nil)); !strings.Contains(got, "file:///client/a") {
			t.Errorf("less__roots = %s, want A's roots", got)
		}
	})

	t.Run("client without the capability", func(t *testing.T) {
		evN := testutil.NewClientEvents("N")
		opts := evN.ClientOptions()
		opts.CreateMessageHandler, opts.ElicitationHandler = nil, nil
		n := connect(t, d, evN, opts)
		for _, c := range []struct{ tool, method string }{{"f__sample", "sampling/createMessage"}, {"f__elicit", "elicitation/create"}} {
			res := callTool(t, n, c.tool, nil)
			if !res.IsError || !strings.Contains(testutil.ToolText(res), "did not declare") || !strings.Contains(testutil.ToolText(res), c.method) {
				t.Errorf("%s from a client without the capability = %q (isError %v), want an error saying it did not declare it", c.tool, testutil.ToolText(res), res.IsError)
			}
		}
		requests := func(ev testutil.ClientEvent) bool {
			return ev.Method == "sampling/createMessage" || ev.Method == "elicitation/create"
		}
		if n := evA.Count(requests) + evB.Count(requests); n != 2 {
			t.Errorf("other sessions got requests meant for N: A %s, B %s", evA, evB)
		}
	})

	// A call that waits for its client's answer (H's person is slow)
	// sends nothing else: the request of the one other call in flight is
	// that call's, and goes to its session. Two sessions whose calls both
	// could have asked are never guessed between.
	t.Run("a call waiting for its client holds no other session back", func(t *testing.T) {
		evH, evO, evP := testutil.NewClientEvents("H"), testutil.NewClientEvents("O"), testutil.NewClientEvents("P")
		entered, release := make(chan struct{}), make(chan struct{})
		opts := evH.ClientOptions()
		answer := opts.CreateMessageHandler
		opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			close(entered)
			<-release
			return answer(ctx, req)
		}
		h := connect(t, d, evH, opts)
		o := connect(t, d, evO, nil)
		p := connect(t, d, evP, nil)
		held := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := callToolErr(h, "f__sample", nil, nil)
			if err != nil {
				t.Errorf("H's f__sample: %v", err)
			}
			held <- res
		}()
		select {
		case <-entered: // H's call is in flight on f, waiting for H's answer
		case <-time.After(wait):
			close(release)
			t.Fatal("H's sampling handler was not called")
		}
		var released sync.Once
		unblock := func() { released.Do(func() { close(release) }) }
		defer unblock()
		// O's tool works a while before it asks (after_ms, longer than
		// the 20 ms a call's requests count as sent together): by then
		// H's call has been waiting.
		res := callTool(t, o, "f__sample", map[string]any{"after_ms": 100})
		if res.IsError || !strings.Contains(testutil.ToolText(res), "from O") {
			t.Errorf("O's f__sample while H's call waits for H = %q (isError %v), want O's own answer", testutil.ToolText(res), res.IsError)
		}
		if n := evO.Count(testutil.Method("sampling/createMessage")); n != 1 {
			t.Errorf("O's sampling handler was called %d times, want once", n)
		}
		// Two calls that do not wait (O's, running, and P's) cannot be
		// told apart: P's request is refused, and neither O nor P is
		// shown it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		running := make(chan error, 1)
		go func() {
			params := &mcp.CallToolParams{Name: "f__progress", Arguments: map[string]any{"steps": 2, "ms": 60000}}
			params.SetProgressToken("running")
			_, err := o.CallTool(ctx, params)
			running <- err
		}()
		evO.Await(t, 1, wait, "the first progress of O's running call", testutil.Method("notifications/progress"))
		res = callTool(t, p, "f__sample", nil)
		if !res.IsError || !strings.Contains(testutil.ToolText(res), "cannot relay sampling/createMessage: 2 client sessions have requests in flight on backend") {
			t.Errorf("P's f__sample beside O's running call = %q (isError %v), want the ambiguity error", testutil.ToolText(res), res.IsError)
		}
		if n := evP.Count(testutil.Method("sampling/createMessage")) + evO.Count(testutil.Method("sampling/createMessage")); n != 1 {
			t.Errorf("sampling handlers called %d times in all, want only O's first", n)
		}
		cancel()
		<-running
		unblock()
		if r := <-held; r == nil || r.IsError || !strings.Contains(testutil.ToolText(r), "from H") {
			t.Errorf("H's f__sample = %+v, want H's answer", r)
		}
	})
}

// Progress tokens are rewritten toward the backend and restored, so equal
// tokens of two sessions stay apart; a cancel reaches only its own call.
func TestProgressAndCancellation(t *testing.T) {
	t.Parallel()
	record := recordFile(t, "f")
	d := startGateway(t, "", fakeBackend(t, "f", "", "--record", record))
	evA, evB := testutil.NewClientEvents("A"), testutil.NewClientEvents("B")
	a := connect(t, d, evA, nil)
	b := connect(t, d, evB, nil)
	token := func(tok any) func(testutil.ClientEvent) bool {
		return func(ev testutil.ClientEvent) bool {
			p, ok := ev.Params.(*mcp.ProgressNotificationParams)
			return ok && ev.Method == "notifications/progress" && fmt.Sprint(p.ProgressToken) == fmt.Sprint(tok)
		}
	}

	t.Run("progress", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, cs := range []*mcp.ClientSession{a, b} {
			wg.Go(func() {
				res, err := callToolErr(cs, "f__progress", map[string]any{"steps": 3}, "tok")
				if err != nil || structured(t, res)["sent"] != 3.0 {
					t.Errorf("f__progress: %v %+v", err, res)
				}
			})
		}
		wg.Wait()
		for _, ev := range []*testutil.ClientEvents{evA, evB} {
			ev.Await(t, 3, wait, `progress with token "tok"`, token("tok"))
		}
		// Whatever was misrouted would have come before these.
		for _, c := range []struct {
			cs *mcp.ClientSession
			ev *testutil.ClientEvents
		}{{a, evA}, {b, evB}} {
			if _, err := callToolErr(c.cs, "f__progress", map[string]any{"steps": 1}, 42); err != nil {
				t.Fatal(err)
			}
			c.ev.Await(t, 1, wait, "progress with token 42", token(42))
			if n := c.ev.Count(token("tok")); n != 3 {
				t.Errorf("%s got %d progress notifications with its token, want 3: %s", c.ev.Name, n, c.ev)
			}
		}
		// The backend saw gateway tokens, not the clients' ones.
		for _, line := range awaitRecorded(t, record, 2, `"name":"progress"`, `"steps":3`) {
			if strings.Contains(line, `"tok"`) {
				t.Errorf("backend got the client's progress token: %s", line)
			}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctxA, cancelA := context.WithCancel(context.Background())
		ctxB, cancelB := context.WithCancel(context.Background())
		defer cancelB()
		doneA, doneB := make(chan error, 1), make(chan error, 1)
		go func() {
			_, err := a.CallTool(ctxA, &mcp.CallToolParams{Name: "f__wait_cancel", Arguments: map[string]any{"who": "A"}})
			doneA <- err
		}()
		go func() {
			_, err := b.CallTool(ctxB, &mcp.CallToolParams{Name: "f__wait_cancel", Arguments: map[string]any{"who": "B"}})
			doneB <- err
		}()
		idA := backendID(t, awaitRecorded(t, record, 1, `"name":"wait_cancel"`, `"who":"A"`)[0])
		idB := backendID(t, awaitRecorded(t, record, 1, `"name":"wait_cancel"`, `"who":"B"`)[0])
		cancelA()
		if err := <-doneA; !errors.Is(err, context.Canceled) {
			t.Errorf("A's cancelled call returned %v", err)
		}
		awaitCancelled(t, a, "f__cancelled", idA)
		if got := cancellations(t, a, "f__cancelled"); len(got) != 1 {
			t.Errorf("backend got cancellations %v; want only A's request %s", got, idA)
		}
		select {
		case err := <-doneB:
			t.Fatalf("B's call ended when A cancelled: %v", err)
		default:
		}
		cancelB()
		<-doneB
		awaitCancelled(t, b, "f__cancelled", idB)
	})
}

// A client that disconnects, lets its resume window pass, or deletes its
// session cancels its calls in flight.
func TestDisconnectCancels(t *testing.T) {
	t.Parallel()
	record := recordFile(t, "f")
	d := startGateway(t, "", fakeBackend(t, "f", "", "--record", record))
	observer := connect(t, d, testutil.NewClientEvents("observer"), nil)

	t.Run("JSON response abandoned", func(t *testing.T) {
		s := rawInit(t, d.URL, "2025-11-25", "{}")
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			if resp := s.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"f__wait_cancel","arguments":{"who":"disconnect"}}}`); resp != nil {
				resp.Body.Close()
			}
		}()
		id := backendID(t, awaitRecorded(t, record, 1, `"who":"disconnect"`)[0])
		cancel()
		if reason := awaitCancelled(t, observer, "f__cancelled", id); !strings.Contains(reason, "disconnected") {
			t.Errorf("cancellation reason %q, want one saying the client disconnected", reason)
		}
	})

	t.Run("event stream not resumed within the window", func(t *testing.T) {
		s := rawInit(t, d.URL, "2025-11-25", `{"sampling":{}}`)
		resp := s.post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"f__sample","arguments":{"id":"window"}}}`)
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		for {
			ev, err := r.Next()
			if err != nil {
				t.Fatalf("stream ended before the sampling request: %v", err)
			}
			if strings.Contains(string(ev.Data), "sampling/createMessage") {
				break
			}
		}
		resp.Body.Close() // lose the stream and never come back
		id := backendID(t, awaitRecorded(t, record, 1, `"name":"sample"`, `"id":"window"`)[0])
		if reason := awaitCancelled(t, observer, "f__cancelled", id); !strings.Contains(reason, "disconnected") {
			t.Errorf("cancellation reason %q, want one saying the client disconnected", reason)
		}
	})

	t.Run("DELETE", func(t *testing.T) {
		cs := connect(t, d, testutil.NewClientEvents("D"), nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__wait_cancel", Arguments: map[string]any{"who": "delete"}})
		id := backendID(t, awaitRecorded(t, record, 1, `"who":"delete"`)[0])
		s := &rawSession{t: t, url: d.URL, id: cs.ID(), protocol: "2025-11-25"}
		resp := s.do(context.Background(), http.MethodDelete, "")
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
		}
		if reason := awaitCancelled(t, observer, "f__cancelled", id); !strings.Contains(reason, "ended the session") {
			t.Errorf("cancellation reason %q, want one saying the client ended the session", reason)
		}
		resp = s.post(context.Background(), `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("ping on the deleted session: HTTP %d, want 404", resp.StatusCode)
		}
	})
}

// Notifications and the response reach the client in the order the backend
// wrote them, after a priming event; a lost stream resumes with
// Last-Event-ID.
func TestEventStreamOrderAndResumption(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "", fakeBackend(t, "f", ""))

	t.Run("order", func(t *testing.T) {
		s := rawInit(t, d.URL, "2025-11-25", "{}")
		resp := s.post(context.Background(), `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"f__progress","arguments":{"steps":5},"_meta":{"progressToken":"p\u00e9"}}}`)
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q, want an event stream", ct)
		}
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		priming, err := r.Next()
		if err != nil || priming.ID == "" || len(priming.Data) != 0 || priming.Retry == 0 {
			t.Fatalf("first event %+v (%v), want a priming event with an id, retry and no data", priming, err)
		}
		var got []string
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			m := decode(t, string(ev.Data))
			switch {
			case m.Method == "notifications/progress":
				if m.Params["progressToken"] != "pé" {
					t.Errorf("progress token %v, want the client's", m.Params["progressToken"])
				}
				got = append(got, fmt.Sprintf("progress %v", m.Params["progress"]))
			case m.Method != "":
				got = append(got, m.Method)
			default:
				got = append(got, "response "+string(m.ID))
			}
		}
		want := []string{"progress 1", "progress 2", "progress 3", "progress 4", "progress 5", `response "call-1"`}
		if !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
	})

	t.Run("backend's own notifications reach the caller", func(t *testing.T) {
		s := rawInit(t, d.URL, "2025-11-25", "{}")
		resp := s.post(context.Background(), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"f__notify","arguments":{"method":"notifications/custom","params":{"n":1}}}}`)
		defer resp.Body.Close()
		if got := readAll(t, resp); !slices.Equal(got, []string{"notifications/custom", "response 5"}) {
			t.Errorf("events %q, want the custom notification, then the response", got)
		}
	})

	t.Run("resume after the end", func(t *testing.T) {
		// A client that lost the last events of a finished stream gets them
		// again within the resume window.
		s := rawInit(t, d.URL, "2025-11-25", "{}")
		resp := s.post(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"f__progress","arguments":{"steps":1},"_meta":{"progressToken":1}}}`)
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		var progress mcphttp.Event
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			if strings.Contains(string(ev.Data), "notifications/progress") {
				progress = ev
			}
		}
		resp.Body.Close()
		if progress.ID == "" {
			t.Fatal("no progress event with an id")
		}
		resp = s.do(context.Background(), http.MethodGet, "", mcphttp.HeaderLastID, progress.ID)
		defer resp.Body.Close()
		if got := readAll(t, resp); !slices.Equal(got, []string{"response 3"}) {
			t.Errorf("resumed finished stream carried %q, want the response again", got)
		}
	})

	t.Run("client without event streams", func(t *testing.T) {
		// Messages that cannot go on a plain JSON answer take the session's
		// standalone stream.
		s := rawInit(t, d.URL, "2025-11-25", "{}")
		get := s.do(context.Background(), http.MethodGet, "")
		defer get.Body.Close()
		resp := s.do(context.Background(), http.MethodPost, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"f__progress","arguments":{"steps":2},"_meta":{"progressToken":"j"}}}`,
			"Accept", "application/json")
		if got := readAll(t, resp); !slices.Equal(got, []string{"response 4"}) {
			t.Errorf("JSON answer %q, want the response alone", got)
		}
		resp.Body.Close()
		r := mcphttp.NewEventReader(get.Body, 1<<20)
		for n := 0; n < 2; {
			ev, err := r.Next()
			if err != nil {
				t.Fatalf("standalone stream ended after %d progress notifications: %v", n, err)
			}
			if len(ev.Data) != 0 {
				if m := decode(t, string(ev.Data)); m.Method != "notifications/progress" || m.Params["progressToken"] != "j" {
					t.Fatalf("standalone stream carried %s, want the progress of request 4", ev.Data)
				}
				n++
			}
		}
	})

	t.Run("resume", func(t *testing.T) {
		s := rawInit(t, d.URL, "2025-11-25", `{"sampling":{}}`)
		resp := s.post(context.Background(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"f__sample"}}`)
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		var request mcphttp.Event
		for len(request.Data) == 0 {
			var err error
			if request, err = r.Next(); err != nil {
				t.Fatalf("stream ended before the sampling request: %v", err)
			}
		}
		resp.Body.Close()
		m := decode(t, string(request.Data))
		if m.Method != "sampling/createMessage" {
			t.Fatalf("first message %s, want the sampling request", request.Data)
		}
		s.notify(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","model":"m","content":{"type":"text","text":"resumed answer"}}}`, m.ID))
		resp = s.do(context.Background(), http.MethodGet, "", mcphttp.HeaderLastID, request.ID)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("resuming GET: HTTP %d", resp.StatusCode)
		}
		r = mcphttp.NewEventReader(resp.Body, 1<<20)
		for {
			ev, err := r.Next()
			if err != nil {
				t.Fatalf("resumed stream ended without the response: %v", err)
			}
			if len(ev.Data) == 0 {
				continue
			}
			m := decode(t, string(ev.Data))
			if string(m.ID) != "7" || !strings.Contains(string(m.Result), "resumed answer") {
				t.Fatalf("resumed stream carried %s, want the response to request 7", ev.Data)
			}
			break
		}
	})
}

// Batches are accepted only from clients that negotiated 2025-03-26.
func TestBatches(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "", fakeBackend(t, "f", ""))
	batch := `[{"jsonrpc":"2.0","id":"a","method":"ping"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"f__echo","arguments":{"text":"in a batch"}}},` +
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`
	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			s := rawInit(t, d.URL, version, "{}")
			resp := s.post(context.Background(), batch)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if version != "2025-03-26" {
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "only clients that negotiated 2025-03-26") {
					t.Errorf("batch from a %s client: HTTP %d %s; want 400 and an error naming 2025-03-26", version, resp.StatusCode, body)
				}
				return
			}
			var got []message
			if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("batch: HTTP %d %s: %v", resp.StatusCode, body, err)
			}
			ids := map[string]string{}
			for _, m := range got {
				ids[string(m.ID)] = string(m.Result)
			}
			if len(got) != 2 || ids[`"a"`] != "{}" || !strings.Contains(ids["2"], "in a batch") {
				t.Errorf("batch responses %s, want ping and echo answered", body)
			}
		})
	}

	// A batch answered as an event stream carries every response, also those
	// that came before the stream had to switch from JSON.
	t.Run("responses before the first notification", func(t *testing.T) {
		s := rawInit(t, d.URL, "2025-03-26", "{}")
		resp := s.post(context.Background(), `[{"jsonrpc":"2.0","id":"a","method":"ping"},`+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"f__progress","arguments":{"steps":1},"_meta":{"progressToken":1}}}]`)
		defer resp.Body.Close()
		got := readAll(t, resp)
		want := []string{`response "a"`, "notifications/progress", "response 2"}
		if !slices.Equal(got, want) {
			t.Errorf("batch events %q, want %q", got, want)
		}
	})

	// Cancelling one request of a batch leaves the others their answers.
	t.Run("one request cancelled", func(t *testing.T) {
		s := rawInit(t, d.URL, "2025-03-26", `{"sampling":{}}`)
		resp := s.post(context.Background(), `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"f__wait_cancel"}},`+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"f__sample"}}]`)
		defer resp.Body.Close()
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		var sampling message
		for sampling.Method == "" {
			ev, err := r.Next()
			if err != nil {
				t.Fatalf("stream ended before the sampling request: %v", err)
			}
			if len(ev.Data) != 0 {
				sampling = decode(t, string(ev.Data))
			}
		}
		s.notify(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"changed my mind"}}`)
		s.notify(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","model":"m","content":{"type":"text","text":"still here"}}}`, sampling.ID))
		var got []string
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			if len(ev.Data) != 0 {
				m := decode(t, string(ev.Data))
				got = append(got, string(m.ID)+" "+string(m.Result))
			}
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], "2 ") || !strings.Contains(got[0], "still here") {
			t.Errorf("after cancelling request 1 of the batch the stream carried %q, want only the response to 2", got)
		}
	})
}

// readAll reads a response to the end, as JSON or as an event stream, and
// names its messages: "response ID" or the method.
func readAll(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var datas []string
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r := mcphttp.NewEventReader(resp.Body, 1<<20)
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ev.Data) != 0 {
				datas = append(datas, string(ev.Data))
			}
		}
	} else {
		body, _ := io.ReadAll(resp.Body)
		var list []json.RawMessage
		if err := json.Unmarshal(body, &list); err != nil {
			list = []json.RawMessage{body}
		}
		for _, m := range list {
			datas = append(datas, string(m))
		}
	}
	var names []string
	for _, data := range datas {
		m := decode(t, data)
		if m.Method != "" {
			names = append(names, m.Method)
		} else {
			names = append(names, "response "+string(m.ID))
		}
	}
	return names
}

// resources/subscribe is refcounted per backend and uri, and updates reach
// only the sessions that subscribed.
func TestSubscriptions(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "", fakeBackend(t, "f", "", "--resources", "3"))
	evA, evB := testutil.NewClientEvents("A"), testutil.NewClientEvents("B")
	a := connect(t, d, evA, nil)
	b := connect(t, d, evB, nil)
	ctx := testutil.Context(t, wait)
	subscribe := func(cs *mcp.ClientSession, uri string) {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	unsubscribe := func(cs *mcp.ClientSession, uri string) {
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatalf("unsubscribe %s: %v", uri, err)
		}
	}
	touch := func(uri string) (subscribed bool) {
		return structured(t, callTool(t, a, "f__touch", map[string]any{"uri": uri}))["subscribed"] == true
	}
	updated := func(uri string) func(testutil.ClientEvent) bool {
		return func(ev testutil.ClientEvent) bool {
			p, ok := ev.Params.(*mcp.ResourceUpdatedNotificationParams)
			return ok && p.URI == uri
		}
	}

	subscribe(a, "fake://r/0")
	subscribe(b, "fake://r/1")
	touch("fake://r/0")
	evA.Await(t, 1, wait, "update of r/0", updated("fake://r/0"))
	touch("fake://r/1")
	evB.Await(t, 1, wait, "update of r/1", updated("fake://r/1"))
	touch("fake://r/0") // after r/1: anything misrouted to A came first
	evA.Await(t, 2, wait, "second update of r/0", updated("fake://r/0"))
	if n := evA.Count(updated("fake://r/1")); n != 0 {
		t.Errorf("A got %d updates of r/1, which it did not subscribe to", n)
	}
	if n := evB.Count(updated("fake://r/0")); n != 0 {
		t.Errorf("B got %d updates of r/0, which it did not subscribe to", n)
	}

	// The backend stays subscribed while any session is.
	subscribe(a, "fake://r/2")
	subscribe(b, "fake://r/2")
	unsubscribe(a, "fake://r/2")
	if !touch("fake://r/2") {
		t.Error("backend unsubscribed from r/2 while B still subscribes")
	}
	unsubscribe(b, "fake://r/2")
	if touch("fake://r/2") {
		t.Error("backend still subscribed to r/2 after the last session unsubscribed")
	}
	// A session that ends drops its subscriptions.
	b.Close()
	testutil.Eventually(t, wait, "r/1 unsubscribed after B closed", func() bool { return !touch("fake://r/1") })
}

// prompts/get and completion/complete go to the backend owning the prefixed
// prompt, under its own name.
func TestPromptAndCompletionRouting(t *testing.T) {
	t.Parallel()
	rec1, rec2 := recordFile(t, "p1"), recordFile(t, "p2")
	d := startGateway(t, "",
		fakeBackend(t, "p1", "", "--prompts", "--record", rec1),
		fakeBackend(t, "p2", "", "--prompts", "--record", rec2))
	cs := connect(t, d, testutil.NewClientEvents("A"), nil)
	ctx := testutil.Context(t, wait)

	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p2__greet", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || res.Description != "Greets Ada." {
		t.Fatalf("prompts/get p2__greet = %+v, %v", res, err)
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "p1__greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "al"},
	})
	if err != nil || !slices.Equal(comp.Completion.Values, []string{"Alan", "Alice"}) {
		t.Fatalf("completion/complete p1__greet = %+v, %v", comp, err)
	}
	count := func(path, method string) int {
		n := 0
		for _, line := range recorded(t, path) {
			if containsAll(line, `"method":"`+method+`"`, `"name":"greet"`) {
				n++
			}
		}
		return n
	}
	if count(rec2, "prompts/get") != 1 || count(rec1, "prompts/get") != 0 {
		t.Errorf("prompts/get p2__greet reached p1 %d and p2 %d times as greet, want p2 once", count(rec1, "prompts/get"), count(rec2, "prompts/get"))
	}
	if count(rec1, "completion/complete") != 1 || count(rec2, "completion/complete") != 0 {
		t.Errorf("completion for p1__greet reached p1 %d and p2 %d times, want p1 once", count(rec1, "completion/complete"), count(rec2, "completion/complete"))
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); err == nil || !strings.Contains(err.Error(), `unknown prompt "greet"`) {
		t.Errorf("prompts/get of an unprefixed name: %v, want unknown prompt", err)
	}
}

// logging/setLevel reaches every backend; log messages reach the session
// whose call caused them, filtered by its level.
func TestLogging(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "", fakeBackend(t, "l1", ""), fakeBackend(t, "l2", ""))
	evA, evB := testutil.NewClientEvents("A"), testutil.NewClientEvents("B")
	a := connect(t, d, evA, nil)
	b := connect(t, d, evB, nil)
	if err := a.SetLoggingLevel(testutil.Context(t, wait), &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"l1__loglevel", "l2__loglevel"} {
		if got := testutil.ToolText(callTool(t, a, tool, nil)); got != "warning" {
			t.Errorf("%s = %q after logging/setLevel warning", tool, got)
		}
	}
	data := func(want string) func(testutil.ClientEvent) bool {
		return func(ev testutil.ClientEvent) bool {
			p, ok := ev.Params.(*mcp.LoggingMessageParams)
			return ok && p.Data == want
		}
	}
	callTool(t, a, "l1__log", map[string]any{"level": "info", "data": "quiet"})
	callTool(t, a, "l1__log", map[string]any{"level": "error", "data": "loud"})
	callTool(t, b, "l2__log", map[string]any{"level": "debug", "data": "for B"})
	evA.Await(t, 1, wait, "the error message", data("loud"))
	evB.Await(t, 1, wait, "B's own message", data("for B"))
	callTool(t, a, "l1__log", map[string]any{"level": "error", "data": "barrier"})
	evA.Await(t, 1, wait, "the barrier message", data("barrier"))
	if n := evA.Count(data("quiet")); n != 0 {
		t.Errorf("A got an info message below its level warning")
	}
	if n := evA.Count(data("for B")); n != 0 {
		t.Errorf("A got the message of B's call")
	}
	if n := evB.Count(data("loud")); n != 0 {
		t.Errorf("B got the message of A's call")
	}
}

// list_changed bursts from a backend cause one refresh and one
// notification, and list_changed reaches only sessions that were offered
// the list.
func TestListChanged(t *testing.T) {
	t.Parallel()
	record := recordFile(t, "a")
	a := fakeBackend(t, "a", "", "--resources", "1", "--record", record, "--list-changed-before-init")
	d := startGateway(t, "", a)
	reload := func(backends ...string) {
		t.Helper()
		toml, _ := testutil.Config(t, strings.Join(backends, ""))
		// Keep the listener: only backends change on reload.
		toml = regexp.MustCompile(`listen = \[[^\]]*\]`).ReplaceAllString(toml, fmt.Sprintf("listen = [%q]", strings.TrimSuffix(strings.TrimPrefix(d.URL, "http://"), "/mcp")))
		if err := os.WriteFile(d.ConfigPath, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		from := len(d.Notify.Messages())
		d.Signal(syscall.SIGHUP)
		i := d.AwaitNotify(t, from, wait, "RELOADING=1", testutil.Has("RELOADING=1"))
		d.AwaitNotify(t, i+1, wait, "READY=1 after the reload", testutil.Has("READY=1"))
		// The reload does not wait for the new backends' handshakes; the
		// list_changed counted below must not be one of theirs.
		healthy := fmt.Sprintf("STATUS=%d/%d backends healthy, ", len(backends), len(backends))
		d.AwaitNotify(t, i+1, wait, "every backend healthy after the reload", func(m string) bool { return strings.Contains(m, healthy) })
	}
	ev1 := testutil.NewClientEvents("S1")
	s1 := connect(t, d, ev1, nil)
	if s1.InitializeResult().Capabilities.Prompts != nil {
		t.Fatal("prompts offered without a backend that has prompts")
	}
	reload(a, fakeBackend(t, "p", "", "--prompts"))
	ev2 := testutil.NewClientEvents("S2")
	s2 := connect(t, d, ev2, nil)
	if c := s2.InitializeResult().Capabilities.Prompts; c == nil || !c.ListChanged {
		t.Fatalf("prompts capability %+v, want listChanged", c)
	}
	reload(a, fakeBackend(t, "p", "", "--prompts"), fakeBackend(t, "q", "", "--prompts"))
	ev2.Await(t, 1, wait, "prompts/list_changed", testutil.Method("notifications/prompts/list_changed"))

	// A resource update comes on the same stream as list_changed, after
	// anything sent before it: a barrier.
	if err := s1.Subscribe(testutil.Context(t, wait), &mcp.SubscribeParams{URI: "fake://r/0"}); err != nil {
		t.Fatal(err)
	}
	barriers := 0
	barrier := func() {
		t.Helper()
		barriers++
		callTool(t, s1, "a__touch", map[string]any{"uri": "fake://r/0"})
		ev1.Await(t, barriers, wait, "the barrier update", testutil.Method("notifications/resources/updated"))
	}
	barrier()
	tools := testutil.Method("notifications/tools/list_changed")
	before := ev1.Count(tools)
	lists := len(awaitRecorded(t, record, 1, `"method":"tools/list"`))
	res := callTool(t, s1, "a__set_tools", map[string]any{"names": []string{"new_tool"}, "burst": 25})
	if res.IsError {
		t.Fatal(testutil.ToolText(res))
	}
	ev1.Await(t, before+1, wait, "tools/list_changed after the burst", tools)
	barrier()
	if n := ev1.Count(tools) - before; n != 1 {
		t.Errorf("a burst of 25 list_changed caused %d tools/list_changed, want 1", n)
	}
	if n := len(awaitRecorded(t, record, 1, `"method":"tools/list"`)) - lists; n < 1 || n > 2 {
		t.Errorf("a burst of 25 list_changed caused %d tools/list requests to the backend, want 1 (2 at most)", n)
	}
	if n := ev1.Count(testutil.Method("notifications/prompts/list_changed")); n != 0 {
		t.Errorf("S1, offered no prompts, got %d prompts/list_changed", n)
	}
	found := false
	for tool, err := range s1.Tools(testutil.Context(t, wait), nil) {
		if err != nil {
			t.Fatal(err)
		}
		found = found || tool.Name == "a__new_tool"
	}
	if !found {
		t.Error("tools/list lacks a__new_tool after list_changed")
	}
}

// The gateway paginates its lists with its own cursors, and reads backends
// to the end of theirs.
func TestPagination(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "page_size = 2\n", fakeBackend(t, "pg", "", "--page-size", "3", "--resources", "5", "--tools", "x,y"))
	cs := connect(t, d, testutil.NewClientEvents("A"), nil)
	ctx := testutil.Context(t, wait)
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	distinct := map[string]bool{}
	for _, n := range names {
		distinct[n] = true
	}
	if len(distinct) != len(names) || len(names) < 24 || !distinct["pg__echo"] || !distinct["pg__pid"] || !distinct["pg__x"] || !distinct["pg__y"] {
		t.Errorf("tools over all pages: %d %q; want every built-in tool of the fake server and x, y, once each", len(names), names)
	}
	n := 0
	for _, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 5 {
		t.Errorf("resources over all pages: %d, want 5", n)
	}

	s := rawInit(t, d.URL, "2025-11-25", "{}")
	list := func(params string) message {
		resp := s.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":`+params+`}`)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return decode(t, string(body))
	}
	first := list("{}")
	var page struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	json.Unmarshal(first.Result, &page)
	if len(page.Tools) != 2 || page.NextCursor == "" {
		t.Errorf("first page %s, want 2 tools and a cursor", first.Result)
	}
	for _, cursor := range []string{`"bogus"`, `"` + page.NextCursor + `x"`, `17`} {
		m := list(`{"cursor":` + cursor + `}`)
		if m.Error == nil || m.Error.Code != -32602 {
			t.Errorf("tools/list with cursor %s: %+v %s, want error -32602", cursor, m.Error, m.Result)
		}
	}
}
