package itest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// healthKeys make health checks fast enough for a test: a stopped child is
// detected within 200ms × 2 + 100ms and restarted at most 200ms × (2 + 2) +
// 2 × 100ms after it stopped.
const healthKeys = `health_interval = "200ms"
health_timeout = "100ms"
failure_threshold = 2
recovery_multiplier = 2
restart_backoff_initial = "10ms"
`

// rpcAnswer is the last JSON-RPC message of a POST's answer, whether it
// came as JSON or as an event stream.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func lastAnswer(t *testing.T, body string) rpcAnswer {
	t.Helper()
	last := body
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" {
			last = d
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal([]byte(last), &a); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return a
}

// logTime returns the time of the daemon's first log line containing what.
func logTime(t *testing.T, d *testutil.Daemon, what string) time.Time {
	t.Helper()
	for _, line := range strings.Split(d.Stderr.String(), "\n") {
		if !strings.Contains(line, what) {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			t.Fatalf("log line without a time: %s", line)
		}
		return at
	}
	t.Fatalf("no log line contains %q", what)
	return time.Time{}
}

func callBody(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// A child that stops answering pings, stopped by SIGSTOP or deaf to ping
// only, is found by the health checks without any client call: its
// circuit opens, calls fail at once with the backend, its state and the
// retry time, and the failed half-open check restarts it.
func TestUnansweredPingsOpenTheCircuitAndRestart(t *testing.T) {
	tests := []struct {
		name string
		args string
		stop bool // SIGSTOP the child
	}{
		{"stopped by SIGSTOP", `[]`, true},
		{"never answers ping", `["--ping", "never"]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := gateway(t, "[backends.h]\ncommand = \"FAKE\"\nargs = "+tt.args+"\n"+healthKeys)
			cs := d.Connect(t, nil)
			before := testutil.FakeProcess(t, cs, "h__pid")
			stopped := time.Now()
			if tt.stop {
				if err := syscall.Kill(before.PID, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { syscall.Kill(before.PID, syscall.SIGCONT) })
			}
			awaitLog(t, d, "circuit open, calls fail at once")
			awaitLog(t, d, "message_id="+journal.MessageCircuitOpen.String())
			t.Logf("circuit opened %s after the child stopped (bound 500ms)", logTime(t, d, "circuit open, calls fail at once").Sub(stopped).Round(time.Millisecond))

			d.AwaitNotify(t, 0, 30*time.Second, "STATUS= counting the unhealthy backend", func(msg string) bool {
				return strings.Contains(msg, "STATUS=0/1 backend healthy, 1 unhealthy, ") && strings.Contains(msg, "; h unhealthy (circuit open)")
			})

			c := newRawClient(t, d.URL)
			var took []time.Duration
			for i := range 100 {
				start := time.Now()
				a := lastAnswer(t, c.post(t, callBody(i, "h__echo", `{"text":"x"}`)))
				took = append(took, time.Since(start))
				if a.Error == nil {
					break // the half-open check already closed or restarted it
				}
				if !strings.Contains(a.Error.Message, `backend "h" is unhealthy`) || !strings.Contains(a.Error.Message, "checked again in") {
					t.Fatalf("call while the circuit is open: %s", a.Error.Message)
				}
				var data struct {
					Backend      string `json:"backend"`
					State        string `json:"state"`
					RetryAfterMs *int64 `json:"retryAfterMs"`
				}
				if err := json.Unmarshal(a.Error.Data, &data); err != nil || data.Backend != "h" || data.State != "unhealthy" || data.RetryAfterMs == nil {
					t.Fatalf("error data %s; want {backend, state, retryAfterMs}", a.Error.Data)
				}
			}
			slices.Sort(took)
			t.Logf("fail-fast latency while open, over %d HTTP calls: p50 %s, p99 %s", len(took), took[len(took)/2], took[len(took)*99/100])

			awaitLog(t, d, "failed its half-open health check; killing it")
			t.Logf("child killed %s after it stopped (bound 1s)", logTime(t, d, "failed its half-open health check").Sub(stopped).Round(time.Millisecond))
			awaitNewChild(t, cs, "h__pid", before.PID)
			t.Logf("new child answered %s after the old one stopped (restart bound 1s, plus the backoff and handshake)", time.Since(stopped).Round(time.Millisecond))
		})
	}
}

// A server without ping answers -32601: that is an answer, so it is alive.
func TestPingMethodNotFoundIsHealthy(t *testing.T) {
	// A long health_timeout: a slow machine must not fail a check here.
	d := gateway(t, "[backends.p]\ncommand = \"FAKE\"\nargs = [\"--ping\", \"unknown\"]\nhealth_interval = \"50ms\"\nhealth_timeout = \"30s\"\nfailure_threshold = 1\n")
	testutil.Eventually(t, 30*time.Second, "five health checks", func() bool {
		return strings.Count(d.Stderr.String(), "health check") >= 5
	})
	if out := d.Stderr.String(); strings.Contains(out, "ok=false") || strings.Contains(out, "circuit open") {
		t.Errorf("a ping answered with -32601 counted as a failure:\n%s", out)
	}
	cs := d.Connect(t, nil)
	testutil.MustCallTool(t, cs, "p__echo", map[string]any{"text": "alive"})
}

// max_concurrent_calls makes the next call wait in line; one that waits
// longer than queue_timeout fails with an error naming the limit.
func TestConcurrencyLimitQueuesThenTimesOut(t *testing.T) {
	dir := t.TempDir()
	d := gateway(t, fmt.Sprintf(`
[backends.s]
command = "FAKE"
args = ["--record", %q]
max_concurrent_calls = 1
queue_timeout = "200ms"
`, dir+"/rec"))
	c := newRawClient(t, d.URL)
	slow := make(chan rpcAnswer, 1)
	go func() { slow <- lastAnswer(t, c.post(t, callBody(1, "s__slow", `{"ms":3000}`))) }()
	awaitFile(t, dir+"/rec", `"name":"slow"`)
	a := lastAnswer(t, c.post(t, callBody(2, "s__echo", `{"text":"queued"}`)))
	if a.Error == nil || !strings.Contains(a.Error.Message, "max_concurrent_calls = 1") || !strings.Contains(a.Error.Message, "queue_timeout") || !strings.Contains(a.Error.Message, "1 calls in line") {
		t.Fatalf("queued call: %+v; want a queue timeout naming the limit and the queue", a.Error)
	}
	if a.Error.Code != -32005 {
		t.Errorf("code %d, want -32005", a.Error.Code)
	}
	if r := <-slow; r.Error != nil {
		t.Errorf("the call holding the slot failed: %+v", r.Error)
	}
	// With the slot free again, calls go through.
	if a := lastAnswer(t, c.post(t, callBody(3, "s__echo", `{"text":"free"}`))); a.Error != nil {
		t.Errorf("call after the slot was freed: %+v", a.Error)
	}
}

// rate_limit refuses calls over the limit at once, saying when the next is
// allowed.
func TestRateLimitRefusesAtOnce(t *testing.T) {
	d := gateway(t, "[backends.r]\ncommand = \"FAKE\"\nrate_limit = \"2/1m\"\n")
	c := newRawClient(t, d.URL)
	for i := range 2 {
		if a := lastAnswer(t, c.post(t, callBody(i, "r__echo", `{"text":"ok"}`))); a.Error != nil {
			t.Fatalf("call %d within the limit: %+v", i, a.Error)
		}
	}
	a := lastAnswer(t, c.post(t, callBody(3, "r__echo", `{"text":"over"}`)))
	if a.Error == nil || !strings.Contains(a.Error.Message, "rate_limit 2/1m0s reached") || !strings.Contains(a.Error.Message, "next call is allowed in") {
		t.Fatalf("call over the limit: %+v", a.Error)
	}
}
