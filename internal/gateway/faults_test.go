package gateway_test

// Faults on the call path: backends that hang, lie or misbehave must not
// leave a client without its answer or reach into another backend's calls.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// hangBackend makes backend name stop reading and writing for good, without
// the gateway noticing: the client cancels the call that hung it, so no
// timeout probes the backend.
func hangBackend(t *testing.T, cs *mcp.ClientSession, name, record string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs.CallTool(ctx, &mcp.CallToolParams{Name: name + "__hang"})
	}()
	awaitRecorded(t, record, 1, `"name":"hang"`)
	cancel()
	<-done
}

// The calls the gateway makes on its own have a deadline: logging/setLevel
// is answered even when a backend never answers it.
func TestSetLevelAnsweredWhenABackendNeverAnswers(t *testing.T) {
	t.Parallel()
	record := recordFile(t, "mute")
	d := startGateway(t, "", fakeBackend(t, "mute", `timeout = "1s"`, "--record", record), fakeBackend(t, "ok", ""))
	cs := connect(t, d, testutil.NewClientEvents("c"), nil)
	hangBackend(t, cs, "mute", record)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("logging/setLevel with a hung backend: %v", err)
	}
}

// A backend can push progress only into its own calls, even when it knows
// the token another backend's call carries.
func TestProgressOnlyFromTheOwningBackend(t *testing.T) {
	t.Parallel()
	record := recordFile(t, "a")
	d := startGateway(t, "", fakeBackend(t, "a", "", "--record", record), fakeBackend(t, "b", ""))
	ev := testutil.NewClientEvents("c")
	cs := connect(t, d, ev, nil)
	done := make(chan error, 1)
	go func() {
		_, err := callToolErr(cs, "a__slow", map[string]any{"ms": 1500}, "mine")
		done <- err
	}()
	var line struct {
		Params struct {
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(awaitRecorded(t, record, 1, `"name":"slow"`)[0]), &line); err != nil || line.Params.Meta.ProgressToken == nil {
		t.Fatalf("backend a got no progress token: %v", err)
	}
	tok := line.Params.Meta.ProgressToken
	if regexp.MustCompile(`^-?[0-9]{1,6}$`).Match(tok) {
		t.Errorf("gateway progress token %s is a small number another backend could guess", tok)
	}
	params := map[string]any{"progressToken": tok, "progress": 1, "total": 2, "message": "injected"}
	callTool(t, cs, "b__notify", map[string]any{"method": "notifications/progress", "params": params})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Progress comes before the result on the call's stream.
	if n := ev.Count(func(e testutil.ClientEvent) bool { return e.Method == "notifications/progress" }); n != 0 {
		t.Errorf("backend b injected %d progress notifications into backend a's call: %s", n, ev)
	}
}

// timeout is an idle timeout: a call that reports progress more often runs
// longer, up to max_call_duration, which ends it without suspecting the
// backend.
func TestTimeoutCountsFromTheLastProgress(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "",
		fakeBackend(t, "idle", `timeout = "2s"`),
		fakeBackend(t, "capped", "timeout = \"30s\"\nmax_call_duration = \"1s\""))
	cs := connect(t, d, testutil.NewClientEvents("c"), nil)

	// 8 steps 500 ms apart: 4 s in all, never 2 s without progress.
	res, err := callToolErr(cs, "idle__progress", map[string]any{"steps": 8, "ms": 500}, "t1")
	if err != nil || structured(t, res)["sent"] != 8.0 {
		t.Fatalf("a call reporting progress every 500ms with timeout 2s: %v %+v", err, res)
	}

	before := callTool(t, cs, "capped__pid", nil)
	_, err = callToolErr(cs, "capped__progress", map[string]any{"steps": 200, "ms": 100}, "t2")
	if err == nil || !strings.Contains(err.Error(), `backend "capped" did not answer tools/call within 1s (max_call_duration)`) {
		t.Fatalf("a call past max_call_duration: %v; want a timeout naming max_call_duration", err)
	}
	if after := callTool(t, cs, "capped__pid", nil); structured(t, after)["pid"] != structured(t, before)["pid"] {
		t.Errorf("the backend was restarted after max_call_duration; it was still working")
	}
}

// deadlineGateway runs a gateway with the backends of the shared-timer
// tests: patient (timeout 60s, recording its calls in record), brisk and
// after (timeout 400ms).
func deadlineGateway(t *testing.T) (d *testutil.Daemon, record string) {
	record = recordFile(t, "patient")
	d = startGateway(t, "",
		fakeBackend(t, "patient", `timeout = "60s"`, "--record", record),
		fakeBackend(t, "brisk", `timeout = "400ms"`),
		fakeBackend(t, "after", `timeout = "400ms"`))
	return d, record
}

// A session times its calls with one timer (see deadline.go). A call whose
// deadline comes before that of a call already in flight still times out
// at its own; so does a call sent after others ended, whose deadlines the
// timer was armed for; and the call still in flight is not timed out.
func TestCallDeadlinesShareTheSessionsTimer(t *testing.T) {
	t.Parallel()
	d, record := deadlineGateway(t)
	cs := connect(t, d, testutil.NewClientEvents("c"), nil)
	timedOut := func(backend string) {
		t.Helper()
		_, err := callToolErr(cs, backend+"__hang", nil, nil)
		if want := fmt.Sprintf("backend %q did not answer tools/call within 400ms", backend); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a call to %s that never ends: %v; want %q", backend, err, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "patient__wait_cancel"})
		waiting <- err
	}()
	awaitRecorded(t, record, 1, `"name":"wait_cancel"`)
	timedOut("brisk") // its deadline is 60 s before patient's

	callTool(t, cs, "after__echo", map[string]any{"text": "x"}) // ends; the timer stays armed for its deadline
	timedOut("after")

	cancel()
	if err := <-waiting; err == nil || strings.Contains(err.Error(), "did not answer") {
		t.Errorf("the call in flight meanwhile ended with %v; want the client's cancellation", err)
	}
}

// blockingSampler is a client whose sampling handler answers only when
// released: it records each request, and whether the gateway cancelled it.
// Release before the session closes, which waits for the handlers.
func blockingSampler(ev *testutil.ClientEvents) (opts *mcp.ClientOptions, release func()) {
	opts = ev.ClientOptions()
	released := make(chan struct{})
	opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		ev.Add("sampling/createMessage", req.Params)
		select {
		case <-ctx.Done():
			ev.Add("cancelled", nil)
			return nil, ctx.Err()
		case <-released:
			return nil, errors.New("released by the test")
		}
	}
	return opts, func() { close(released) }
}

// A request a backend sends to a client times out after the backend's
// client_request_timeout: the backend gets an error, the client
// notifications/cancelled.
func TestRelayedRequestTimesOut(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "", fakeBackend(t, "f", `client_request_timeout = "1s"`))
	ev := testutil.NewClientEvents("c")
	opts, release := blockingSampler(ev)
	cs := connect(t, d, ev, opts)
	t.Cleanup(release)
	res, err := callToolErr(cs, "f__sample", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(structured(t, res)["error"])
	if !strings.Contains(got, "client_request_timeout") || !strings.Contains(got, "-32001") {
		t.Errorf("the backend got %s; want error -32001 naming client_request_timeout", got)
	}
	ev.Await(t, 1, wait, "the client's sampling request cancelled", func(e testutil.ClientEvent) bool { return e.Method == "cancelled" })
}

// When a backend exits, the requests it sent to clients are cancelled
// toward them.
func TestRelayedRequestCancelledWhenTheBackendExits(t *testing.T) {
	t.Parallel()
	d := startGateway(t, "", fakeBackend(t, "f", ""))
	ev := testutil.NewClientEvents("c")
	opts, release := blockingSampler(ev)
	cs := connect(t, d, ev, opts)
	t.Cleanup(release)
	done := make(chan error, 1)
	go func() {
		_, err := callToolErr(cs, "f__sample", nil, nil)
		done <- err
	}()
	ev.Await(t, 1, wait, "the sampling request", func(e testutil.ClientEvent) bool { return e.Method == "sampling/createMessage" })
	callToolErr(cs, "f__crash", nil, nil)
	ev.Await(t, 1, wait, "the client's sampling request cancelled", func(e testutil.ClientEvent) bool { return e.Method == "cancelled" })
	if err := <-done; err == nil || !strings.Contains(err.Error(), "backend process is gone") {
		t.Errorf("the call that sent the request ended with %v; want the backend gone", err)
	}
}

// Every message the gateway writes as an event is one line, whatever JSON
// whitespace (raw CR) the backend put between its tokens: a CR ends an SSE
// line.
func TestEventsAreSingleLinesWhateverTheBackendWrote(t *testing.T) {
	t.Parallel()
	// A backend without capabilities that answers x/crlf with a
	// notification and a result, both with raw CRs between tokens.
	script := `read -r l
echo '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}'
read -r l
echo '{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}'
while read -r l; do case "$l" in *'"method":"x/crlf"'*)
id=${l#*'"id":'}; id=${id%%,*}
printf '{"jsonrpc":"2.0",\r"method":"x/note",\r"params":{"a":\r1}}\n'
printf '{"jsonrpc":"2.0",\r"id":%s,\r"result":{"b":\r2}}\n' "$id";;
esac; done`
	d := startGateway(t, "", fmt.Sprintf("[backends.sh]\ncommand = \"sh\"\nargs = [\"-c\", %q]\n", script))
	s := rawInit(t, d.URL, "2025-11-25", `{}`)
	resp := s.post(context.Background(), `{"jsonrpc":"2.0","id":7,"method":"x/crlf"}`)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("answer is %s, want an event stream: %q", resp.Header.Get("Content-Type"), body)
	}
	if bytes.IndexByte(body, '\r') >= 0 {
		t.Errorf("the event stream holds a raw CR: %q", body)
	}
	var got []string
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "" {
			got = append(got, data)
			decode(t, data)
		}
	}
	if len(got) != 2 {
		t.Errorf("got data lines %q; want the notification and the response", got)
	}
}

// Stateless requests in flight share one timer (see deadline.go): a call
// whose deadline comes before that of another request's call in flight
// times out at its own, so does one sent after others ended, whose
// deadlines the timer was armed for, and the request in flight is not
// timed out.
func TestStatelessDeadlinesShareOneTimer(t *testing.T) {
	t.Parallel()
	d, record := deadlineGateway(t)
	timedOut := func(backend string) {
		t.Helper()
		_, m := modernCall(t, d.URL, modernBody(1, "tools/call", fmt.Sprintf(`"name":%q`, backend+"__hang"), modernMeta("{}")),
			modernHeaders("tools/call", backend+"__hang")...)
		e, _ := m["error"].(map[string]any)
		if want := fmt.Sprintf("backend %q did not answer tools/call within 400ms", backend); !strings.Contains(fmt.Sprint(e["message"]), want) {
			t.Errorf("a stateless call to %s that never ends: %v; want %q", backend, m, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan string, 1)
	go func() {
		call := modernBody(1, "tools/call", `"name":"patient__wait_cancel"`, modernMeta("{}"))
		resp, err := http.DefaultClient.Do(rawRequest(ctx, d.URL, call, modernHeaders("tools/call", "patient__wait_cancel")...))
		if err != nil {
			waiting <- err.Error()
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		waiting <- fmt.Sprint(string(body), err)
	}()
	awaitRecorded(t, record, 1, `"name":"wait_cancel"`)
	timedOut("brisk") // its deadline is 60 s before patient's

	if _, m := modernCall(t, d.URL, modernBody(1, "tools/call", `"name":"after__echo","arguments":{"text":"x"}`, modernMeta("{}")),
		modernHeaders("tools/call", "after__echo")...); m["result"] == nil {
		t.Fatalf("after__echo: %v", m) // ends; the timer stays armed for its deadline
	}
	timedOut("after")

	select {
	case body := <-waiting:
		t.Fatalf("the request in flight meanwhile ended: %s", body)
	default:
	}
	cancel()
	if body := <-waiting; strings.Contains(body, "did not answer") {
		t.Errorf("the request in flight meanwhile was timed out: %s", body)
	}
}
