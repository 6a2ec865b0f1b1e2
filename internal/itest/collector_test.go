package itest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testing/otlpsink"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// The proof of issue 42 against a real OpenTelemetry Collector: the
// collector's own packages with the OTLP receiver and the file exporter
// (internal/testing/otelcol, built and cached by packaging/ci/otelcol.sh),
// receiving from mcpgated and from the backends, and the test reading the
// files it writes. These tests run when MCPGATE_OTELCOL names the binary:
// make telemetry (part of make check) sets it.

// collector is a running OpenTelemetry Collector.
type collector struct {
	url             string // its OTLP/HTTP endpoint
	traces, metrics string // the files its exporters write, OTLP/JSON
	cmd             *exec.Cmd
	out             *testutil.Buffer
	done            chan struct{}
}

// startCollector starts a collector on a free port until the test ends.
func startCollector(t *testing.T) *collector {
	t.Helper()
	bin := os.Getenv("MCPGATE_OTELCOL")
	if bin == "" {
		t.Skip("no OpenTelemetry Collector: set MCPGATE_OTELCOL to the binary packaging/ci/otelcol.sh prints (make telemetry does)")
	}
	dir := t.TempDir()
	port := testutil.FreePort(t)
	c := &collector{url: fmt.Sprintf("http://127.0.0.1:%d", port), traces: filepath.Join(dir, "traces.jsonl"),
		metrics: filepath.Join(dir, "metrics.jsonl"), out: &testutil.Buffer{}, done: make(chan struct{})}
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file/traces:
    path: %s
    flush_interval: 50ms
  file/metrics:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
`, port, c.traces, c.metrics)
	cfg := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(bin, "--config="+cfg)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start the collector %s: %v", bin, err)
	}
	go func() {
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("collector output:\n%s", c.out.String())
		}
	})
	c.out.Await(t, 30*time.Second, "the collector to be ready", func(out string) bool {
		return strings.Contains(out, "Everything is ready")
	})
	return c
}

// kill ends the collector, by its PID, unless it is gone already.
func (c *collector) kill() {
	select {
	case <-c.done:
		return
	default:
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGCONT) // a frozen one dies all the same
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

// read returns what the collector wrote so far.
func (c *collector) read(t *testing.T) ([]otlpsink.Span, []otlpsink.Point) {
	t.Helper()
	spans, _, err := otlpsink.ReadFile(c.traces)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	_, points, err := otlpsink.ReadFile(c.metrics)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return spans, points
}

// await waits until cond holds for what the collector wrote.
func (c *collector) await(t *testing.T, what string, cond func(spans []otlpsink.Span, points []otlpsink.Point) bool) {
	t.Helper()
	var spans []otlpsink.Span
	ok := testutil.Poll(60*time.Second, 50*time.Millisecond, func() bool {
		var points []otlpsink.Point
		spans, points = c.read(t)
		return cond(spans, points)
	})
	if !ok {
		t.Fatalf("timed out waiting for the collector to receive %s; it has %d spans:\n%s", what, len(spans), otlpsink.Describe(spans))
	}
}

// newTrace is a client's fresh trace context: its trace id, its span's
// id and the traceparent that names them.
func newTrace() (traceID, spanID, traceparent string) {
	var b [24]byte
	rand.Read(b[:])
	traceID, spanID = hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	return traceID, spanID, "00-" + traceID + "-" + spanID + "-01"
}

// inTrace returns the spans of one trace.
func inTrace(spans []otlpsink.Span, traceID string) []otlpsink.Span {
	var out []otlpsink.Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// fixtureProcess starts the 2026 fixture (packaging/npm) serving HTTP on
// a free port, tracing to c as service, and returns its MCP endpoint.
func fixtureHTTP(t *testing.T, fixture string, c *collector, service string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	out := &testutil.Buffer{}
	cmd := exec.Command("node", fixture, "--http", addr)
	cmd.Env = testutil.Env("OTEL_EXPORTER_OTLP_ENDPOINT="+c.url, "OTEL_SERVICE_NAME="+service)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	out.Await(t, 30*time.Second, "the fixture to serve HTTP", func(s string) bool { return strings.Contains(s, "serves http://") })
	return "http://" + addr + "/mcp"
}

// fixturePath is everything-server-2026.mjs as deps.sh installs it.
func fixturePath(t *testing.T) string {
	t.Helper()
	path := filepath.Join(testutil.CacheDir(), "npm", "everything-server-2026.mjs")
	if _, err := os.Stat(path); err != nil {
		testutil.Unavailable(t, "the 2026 fixture is not installed (packaging/ci/deps.sh installs it): %v", err)
	}
	return path
}

// Tokens of the clients of collectorGateway.
const (
	wideToken  = "mcpgate_itest_wide_0123456789"
	tightToken = "mcpgate_itest_tight_0123456789"
)

// collectorGateway starts mcpgated exporting traces and metrics to c,
// with the fixture as its backends (each tracing to c as backend-NAME):
// m over stdio in 2026-07-28, l over stdio as a 2025 server, r remote
// over HTTP, p a pool (an instance per session), down a server that dies
// at its first call with l as its fallback, and the composite both (a
// step on m, a step on r); clients wide (everything) and tight (all but
// m__test_sampling).
func collectorGateway(t *testing.T, c *collector, more ...string) *testutil.Daemon {
	t.Helper()
	fixture := fixturePath(t)
	bins := testutil.Build(t)
	env := func(name string) string {
		return fmt.Sprintf(`env = { OTEL_EXPORTER_OTLP_ENDPOINT = %q, OTEL_SERVICE_NAME = "backend-%s" }`, c.url, name)
	}
	backends := fmt.Sprintf(`
[backends.m]
command = "node"
args = [%[1]q, "--stdio"]
%[2]s

[backends.l]
command = "node"
args = [%[1]q, "--stdio-2025"]
%[3]s

[backends.r]
url = %[4]q

[backends.p]
command = "node"
args = [%[1]q, "--stdio-2025"]
instance = "session"
%[5]s

[backends.down]
command = %[6]q
args = ["--tools", "test_image_content", "--crash-after", "0"]
fallback = ["l"]
max_restarts = 0

[composites.both]
steps = [{ tool = "m__test_simple_text" }, { tool = "r__test_simple_text" }]

[clients.wide]
token_sha256 = %[7]q

[clients.tight]
token_sha256 = %[8]q
tools = ["*", "!m__test_sampling"]

[telemetry]
traces = true
metrics = true
`, fixture, env("m"), env("l"), fixtureHTTP(t, fixture, c, "backend-r"), env("p"), bins.Fake, sha256Hex(wideToken), sha256Hex(tightToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required", Gateway: strings.Join(more, "\n")})
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.url, "OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_METRIC_EXPORT_INTERVAL=200",
	}})
}

// tokenSession is a raw 2025 session of the client with token.
func tokenSession(t *testing.T, url, token string) *rawClient {
	t.Helper()
	c := &rawClient{url: url}
	auth := map[string]string{"Authorization": "Bearer " + token}
	resp, body := c.do(t, "POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, auth)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	c.session = resp.Header.Get("Mcp-Session-Id")
	c.do(t, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, auth)
	c.header = auth
	return c
}

// tracedCall sends a tools/call in the session with a fresh traceparent
// header and returns its trace and the client's span, and the answer.
func tracedCall(t *testing.T, c *rawClient, id int, tool string) (traceID, spanID, body string) {
	t.Helper()
	traceID, spanID, tp := newTrace()
	h := map[string]string{"traceparent": tp}
	resp, body := c.do(t, "POST", callBody(id, tool, `{}`), h)
	if resp.StatusCode != 200 {
		t.Fatalf("tools/call %s: %s %s", tool, resp.Status, body)
	}
	return traceID, spanID, body
}

// TestCollectorGetsOneTracePerCall: for each kind of call a client that
// sent traceparent makes, the collector gets one trace: the gateway's
// server span the child of the client's span, its client span to the
// backend the server span's child, and the backend's own span (the
// fixture, with the OpenTelemetry JS SDK, parented by _meta.traceparent)
// the client span's child; with the conventions' names and attributes.
// Then the histograms count what was called.
func TestCollectorGetsOneTracePerCall(t *testing.T) {
	c := startCollector(t)
	d := collectorGateway(t, c)
	wide := tokenSession(t, d.URL, wideToken)

	type hop struct {
		name, traceID, clientSpan string
		backend, backendService   string // the gateway's client span and the backend's own
		tool                      string // the backend's tool
	}
	var hops []hop
	for i, h := range []struct{ name, tool, backend, original string }{
		{"a stdio backend in 2026-07-28", "m__test_simple_text", "m", "test_simple_text"},
		{"a stdio backend in 2025", "l__test_simple_text", "l", "test_simple_text"},
		{"a remote backend", "r__test_simple_text", "r", "test_simple_text"},
		{"an instance of a pool", "p__test_simple_text", "p", "test_simple_text"},
	} {
		traceID, spanID, body := tracedCall(t, wide, 10+i, h.tool)
		if !strings.Contains(body, "simple text response") {
			t.Fatalf("%s: %s", h.name, body)
		}
		hops = append(hops, hop{h.name, traceID, spanID, h.backend, "backend-" + h.backend, h.original})
	}
	for _, h := range hops {
		want := 3 // the gateway's server and client span, the backend's
		if h.backend == "p" {
			want++ // the wait for the session's instance
		}
		var spans []otlpsink.Span
		c.await(t, h.name+"'s hops", func(all []otlpsink.Span, _ []otlpsink.Point) bool {
			spans = inTrace(all, h.traceID)
			return len(spans) >= want
		})
		server := spanWhere(spans, func(s otlpsink.Span) bool { return s.Kind == "server" && s.Service == "mcpgate" })
		client := spanWhere(spans, func(s otlpsink.Span) bool { return s.Kind == "client" && s.Service == "mcpgate" })
		backend := spanWhere(spans, func(s otlpsink.Span) bool { return s.Service == h.backendService })
		if server == nil || client == nil || backend == nil || len(spans) != want {
			t.Errorf("%s: want the gateway's server and client span and %s's, one each; got\n%s", h.name, h.backendService, otlpsink.Describe(spans))
			continue
		}
		if h.backend == "p" {
			wait := spanWhere(spans, named("admission p"))
			if wait == nil || wait.ParentID != server.SpanID || wait.Attrs["mcpgate.admission"] != "instance" {
				t.Errorf("an instance of a pool: no admission span under the server span:\n%s", otlpsink.Describe(spans))
			}
		}
		if server.ParentID != h.clientSpan || client.ParentID != server.SpanID || backend.ParentID != client.SpanID {
			t.Errorf("%s: the spans do not chain client → server → client → backend:\n%s", h.name, otlpsink.Describe(spans))
		}
		wantServer := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": h.backend + "__" + h.tool, "mcp.session.id": wide.session,
			"mcp.protocol.version": "2025-11-25", "network.transport": "tcp", "mcpgate.client": "wide", "gen_ai.operation.name": "execute_tool"}
		if server.Name != "tools/call "+h.backend+"__"+h.tool || !server.Has(wantServer) {
			t.Errorf("%s: server span %q %v; want %v", h.name, server.Name, server.Attrs, wantServer)
		}
		transport := "pipe"
		if h.backend == "r" {
			transport = "tcp"
		}
		wantClient := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": h.tool, "mcpgate.backend": h.backend, "network.transport": transport}
		if client.Name != "tools/call "+h.tool || !client.Has(wantClient) || client.Attrs["jsonrpc.request.id"] == "" {
			t.Errorf("%s: client span %q %v; want %v and a jsonrpc.request.id", h.name, client.Name, client.Attrs, wantClient)
		}
		if h.backend == "r" && backend.Attrs["test.http.parent_span_id"] != client.SpanID {
			t.Errorf("a remote backend: its request's traceparent header named span %q, want the client span %s", backend.Attrs["test.http.parent_span_id"], client.SpanID)
		}
		if h.backend == "p" && client.Attrs["mcpgate.backend.instance"] == "" {
			t.Errorf("an instance of a pool: the client span does not name the instance: %v", client.Attrs)
		}
	}
	checkStateless(t, c, d)
	checkFallback(t, c, wide)
	checkComposite(t, c, wide)
	checkErrors(t, c, wide)
	checkRefused(t, c, d)
	checkInputRound(t, c, d)
	checkHistograms(t, c, wide)
	checkBatch(t, c, d) // after the counts, which it would add to
}

// TestCollectorDownCostsCallsNothing: a collector that stops answering
// (frozen: it takes the connection, never the request), and then is gone,
// fails no call and holds none up: the calls made meanwhile all answer
// while the exporter still waits for its timeout, 10 minutes here. The
// spans lost are counted on /metrics: those the bounded queue (4 here)
// could not take while the collector was frozen, and once it is gone
// those too that the exporter could not send.
func TestCollectorDownCostsCallsNothing(t *testing.T) {
	c := startCollector(t)
	bins := testutil.Build(t)
	port := testutil.FreePort(t)
	toml, url := testutil.ConfigWith(t, fmt.Sprintf("[backends.f]\ncommand = %q\n\n[telemetry]\ntraces = true\nmetrics = true\n", bins.Fake),
		testutil.ConfigOptions{Gateway: fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port)})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.url, "OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_BSP_MAX_QUEUE_SIZE=4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2",
		"OTEL_BSP_EXPORT_TIMEOUT=600000", "OTEL_EXPORTER_OTLP_TIMEOUT=600000", "OTEL_METRIC_EXPORT_INTERVAL=600000",
	}})
	s := newRawClient(t, d.URL)
	traceID, _, _ := tracedCall(t, s, 1, "f__echo")
	awaitTrace(t, c, "a call's spans while the collector answers", traceID, 2)

	const calls = 40
	call := func(from int) {
		for i := range calls {
			resp, body := s.do(t, "POST", callBody(from+i, "f__echo", `{"text":"x"}`), nil)
			if resp.StatusCode != 200 || !strings.Contains(body, `"text":"x"`) {
				t.Fatalf("call %d with the collector down: %s %s", from+i, resp.Status, body)
			}
		}
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGSTOP)
	call(100)
	// lost counts the spans of a family with an error_type: dropped from
	// the queue, or failed to export.
	lost := func(family string) float64 {
		var n float64
		for _, m := range scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))[family].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "error_type" {
					n += m.Counter.GetValue()
				}
			}
		}
		return n
	}
	const dropped, failed = "otel_sdk_processor_span_processed_total", "otel_sdk_exporter_span_exported_total"
	// Each call is two spans; the queue holds 4, the export in progress 2.
	if n := lost(dropped); n < 2*calls-6 {
		t.Errorf("%v spans counted as dropped (%s{error_type=\"queue_full\"}) with the collector frozen, want at least %d", n, dropped, 2*calls-6)
	}
	c.kill()
	call(200)
	if n := lost(dropped) + lost(failed); n < 4*calls-6 {
		t.Errorf("%v spans counted as dropped or failed (%s, %s with an error_type) once the collector is gone too, want at least %d", n, dropped, failed, 4*calls-6)
	}
}
