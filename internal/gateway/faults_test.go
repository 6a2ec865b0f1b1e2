package gateway_test

// Faults on the call path: backends that hang, lie or misbehave must not
// leave a client without its answer or reach into another backend's calls.

import (
	"context"
	"encoding/json"
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
