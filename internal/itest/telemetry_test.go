package itest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/testing/otlpsink"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/journaldtest"
)

// The OTLP tests export to a receiver of the test's own (otlpsink), which
// decodes what the SDK's exporters send; the proof against a real
// OpenTelemetry Collector is in collector_test.go.

// clientTrace is the trace context a client sends, W3C traceparent: its
// trace id and its own span's id.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientParent  = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// telemetryEnv is the environment that exports to url quickly: spans
// every few milliseconds, metrics every 100ms.
func telemetryEnv(url string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_METRIC_EXPORT_INTERVAL=100"}
}

// telemetryGateway starts mcpgated with traces and metrics on, exporting
// to a fresh sink, with backends (FAKE is the fake server) and more
// [gateway] keys.
func telemetryGateway(t *testing.T, gatewayKeys, backends string) (*testutil.Daemon, *otlpsink.Sink) {
	t.Helper()
	sink := otlpsink.Start(t)
	bins := testutil.Build(t)
	toml, url := testutil.Config(t, strings.ReplaceAll(backends, "FAKE", bins.Fake)+"\n[telemetry]\ntraces = true\nmetrics = true\n")
	toml = strings.Replace(toml, "[gateway]\n", "[gateway]\n"+gatewayKeys+"\n", 1)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Env: telemetryEnv(sink.URL)})
	return d, sink
}

// spanWhere returns the first span that match accepts, or nil.
func spanWhere(spans []otlpsink.Span, match func(otlpsink.Span) bool) *otlpsink.Span {
	for i := range spans {
		if match(spans[i]) {
			return &spans[i]
		}
	}
	return nil
}

func named(name string) func(otlpsink.Span) bool {
	return func(s otlpsink.Span) bool { return s.Name == name }
}

// A 2025 session's tools/call with traceparent is one trace: the
// gateway's server span is the child of the client's span, the client
// span to the backend its child, with the conventions' names and
// attributes; the backend gets the client span's context in _meta.
func TestTraceOfACallAcrossTheGateway(t *testing.T) {
	port := testutil.FreePort(t)
	d, sink := telemetryGateway(t, fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port), `
[backends.fake]
command = "FAKE"
`)
	c := newRawClient(t, d.URL)
	resp, body := c.do(t, "POST", callBody(7, "fake__echo", `{"text":"hi"}`), map[string]string{"traceparent": clientParent})
	if resp.StatusCode != 200 {
		t.Fatalf("tools/call: %s %s", resp.Status, body)
	}
	var server, client *otlpsink.Span
	sink.Await(t, 10*time.Second, "the call's server and client spans", func(spans []otlpsink.Span, _ []otlpsink.Point) bool {
		server = spanWhere(spans, func(s otlpsink.Span) bool { return s.Kind == "server" && s.Name == "tools/call fake__echo" })
		client = spanWhere(spans, func(s otlpsink.Span) bool { return s.Kind == "client" && s.Name == "tools/call echo" })
		return server != nil && client != nil
	})
	if server.TraceID != clientTraceID || server.ParentID != clientSpanID {
		t.Errorf("server span in trace %s under %s; want the client's trace %s under its span %s", server.TraceID, server.ParentID, clientTraceID, clientSpanID)
	}
	if client.TraceID != clientTraceID || client.ParentID != server.SpanID {
		t.Errorf("client span in trace %s under %s; want under the server span %s", client.TraceID, client.ParentID, server.SpanID)
	}
	wantServer := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "fake__echo", "jsonrpc.request.id": "7",
		"mcp.session.id": c.session, "mcp.protocol.version": "2025-11-25", "network.transport": "tcp", "gen_ai.operation.name": "execute_tool",
		"mcpgate.client": "anonymous"}
	if !server.Has(wantServer) {
		t.Errorf("server span attributes %v; want at least %v", server.Attrs, wantServer)
	}
	wantClient := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "mcpgate.backend": "fake",
		"network.transport": "pipe", "mcp.protocol.version": "2025-11-25"}
	if !client.Has(wantClient) {
		t.Errorf("client span attributes %v; want at least %v", client.Attrs, wantClient)
	}
	if _, ok := client.Attrs["jsonrpc.request.id"]; !ok {
		t.Errorf("client span has no jsonrpc.request.id: %v", client.Attrs)
	}
	wantMeta := fmt.Sprintf(`"traceparent":"00-%s-%s-01"`, clientTraceID, client.SpanID)
	if !strings.Contains(body, strings.ReplaceAll(wantMeta, `"`, `\"`)) {
		t.Errorf("the backend's rawMeta does not carry the client span's context %s: %s", wantMeta, body)
	}

	// The histograms are on /metrics too, beside mcpgate's own metrics,
	// with the host label.
	fams := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if n := value(t, fams, "mcp_server_operation_duration_seconds", map[string]string{"mcp_method_name": "tools/call", "gen_ai_tool_name": "fake__echo",
		"network_transport": "tcp", "host": hostLabelOf(t, fams)}); n != 1 {
		t.Errorf("mcp_server_operation_duration_seconds counts %v calls of fake__echo, want 1", n)
	}
	if n := value(t, fams, "mcp_client_operation_duration_seconds", map[string]string{"gen_ai_tool_name": "echo", "mcpgate_backend": "fake"}); n != 1 {
		t.Errorf("mcp_client_operation_duration_seconds counts %v calls of echo, want 1", n)
	}
	if n := value(t, fams, "mcpgate_calls_total", map[string]string{"backend": "fake", "outcome": "ok"}); n != 1 {
		t.Errorf("mcpgate_calls_total counts %v calls, want 1", n)
	}
}

// hostLabelOf is the host label of mcpgate's own series.
func hostLabelOf(t *testing.T, fams map[string]*dto.MetricFamily) string {
	t.Helper()
	for _, m := range fams["mcpgate_sessions"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "host" {
				return l.GetValue()
			}
		}
	}
	t.Fatal("mcpgate_sessions has no host label")
	return ""
}

// recordedParams returns the params of the tools/call whose line in the
// fake server's --record file holds marker: the bytes the backend got.
func recordedParams(t *testing.T, record, marker string) string {
	t.Helper()
	var line string
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("a call with %s in %s", marker, record), func() bool {
		data, _ := os.ReadFile(record)
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, `"method":"tools/call"`) && strings.Contains(l, marker) {
				line = l
				return true
			}
		}
		return false
	})
	_, params, ok := strings.Cut(line, `"params":`)
	if !ok || !strings.HasSuffix(params, "}") {
		t.Fatalf("the recorded call has no params: %s", line)
	}
	return strings.TrimSuffix(params, "}")
}

// With telemetry off the backend gets the bytes it got before telemetry
// existed: the client's params, its own traceparent included, with only
// the tool's name rewritten; with tracing on, the same bytes but for
// _meta.traceparent, which names the gateway's client span (added when
// the client sent none).
func TestTraceContextSplicedOnlyWhenTracing(t *testing.T) {
	dir := t.TempDir()
	params := `{"name":"f__echo","arguments":{"text":"first"},"_meta":{"traceparent":"` + clientParent + `","k":1}}`
	bare := `{"name":"f__echo","arguments":{"text":"second"}}`
	send := func(c *rawClient, header map[string]string) {
		c.do(t, "POST", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":`+params+`}`, header)
		c.do(t, "POST", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":`+bare+`}`, header)
	}
	backends := fmt.Sprintf("[backends.f]\ncommand = \"FAKE\"\nargs = [\"--record\", %q]\n", dir+"/off")
	off := gateway(t, backends)
	send(newRawClient(t, off.URL), map[string]string{"traceparent": clientParent})
	if got, want := recordedParams(t, dir+"/off", "first"), strings.Replace(params, "f__echo", "echo", 1); got != want {
		t.Errorf("telemetry off: the backend got params\n%s\nwant the client's, renamed:\n%s", got, want)
	}
	if got, want := recordedParams(t, dir+"/off", "second"), `{"name":"echo","arguments":{"text":"second"}}`; got != want {
		t.Errorf("telemetry off: the backend got params %s, want %s", got, want)
	}

	on, sink := telemetryGateway(t, "", strings.Replace(backends, "/off", "/on", 1))
	send(newRawClient(t, on.URL), nil)
	var clients []otlpsink.Span
	sink.Await(t, 10*time.Second, "the two calls' client spans", func(spans []otlpsink.Span, _ []otlpsink.Point) bool {
		clients = clients[:0]
		for _, s := range spans {
			if s.Kind == "client" {
				clients = append(clients, s)
			}
		}
		return len(clients) == 2
	})
	for _, tc := range []struct{ marker, want string }{
		// The client's own trace context, from its _meta: the client span's.
		{"first", `{"name":"echo","arguments":{"text":"first"},"_meta":{"traceparent":"00-` + clientTraceID + `-%s-01","k":1}}`},
		// No trace context: a trace of the gateway's, in a _meta of its own.
		{"second", `{"_meta":{"traceparent":"00-%s-%s-01"},"name":"echo","arguments":{"text":"second"}}`},
	} {
		got := recordedParams(t, dir+"/on", tc.marker)
		found := false
		for _, s := range clients {
			want := fmt.Sprintf(tc.want, s.SpanID)
			if tc.marker == "second" {
				want = fmt.Sprintf(tc.want, s.TraceID, s.SpanID)
			}
			found = found || got == want
		}
		if !found {
			t.Errorf("tracing: the backend got params\n%s\nwant the client's with a client span's traceparent (%s); client spans:\n%s", got, tc.want, otlpsink.Describe(clients))
		}
	}
}

// The journal entries a traced call causes carry its trace (the real
// journald): the audit entry and a refusal by policy get TRACE_ID= and
// SPAN_ID= of the request's server span, so journalctl TRACE_ID=… finds
// them.
func TestJournalEntriesOfATracedCallNameItsTrace(t *testing.T) {
	j := journaldtest.Start(t)
	sink := otlpsink.Start(t)
	bins := testutil.Build(t)
	toml, url := journalConfig(t, journal.TargetJournal, `audit = "calls"`, fmt.Sprintf(`
[backends.a]
command = %q

[clients.narrow]
token_sha256 = %q
tools = ["*", "!a__pid"]

[telemetry]
traces = true
`, bins.Fake, sha256Hex(narrowToken)))
	toml = strings.Replace(toml, `auth = "none"`, `auth = "required"`, 1)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Args: []string{"--journal-socket", j.Socket()}, Env: telemetryEnv(sink.URL)})
	c := tokenSession(t, d.URL, narrowToken)

	called, _, _ := tracedCall(t, c, 1, "a__echo")
	refused, _, _ := tracedCall(t, c, 2, "a__pid")
	serverSpan := func(traceID string) string {
		var id string
		sink.Await(t, 10*time.Second, "the server span of trace "+traceID, func(spans []otlpsink.Span, _ []otlpsink.Point) bool {
			s := spanWhere(spans, func(s otlpsink.Span) bool { return s.TraceID == traceID && s.Kind == "server" })
			if s != nil {
				id = s.SpanID
			}
			return s != nil
		})
		return id
	}
	for _, tc := range []struct {
		what    string
		traceID string
		match   entry
	}{
		{"the audit entry", called, daemonLog(journal.MessageAudit, entry{"MCPGATE_TOOL": "a__echo"})},
		{"the refusal", refused, daemonLog(journal.MessageAccessDenied, entry{"MCPGATE_TOOL": "a__pid"})},
	} {
		got := j.AwaitMatch(t, 1, tc.match)
		checkFields(t, tc.what, got[0], entry{"TRACE_ID": tc.traceID, "SPAN_ID": serverSpan(tc.traceID)})
	}
}

// A backend started on demand makes the first call wait for its start:
// a span of its own, under the call's, that says so.
func TestTraceOfAStartOnDemand(t *testing.T) {
	d, sink := telemetryGateway(t, "", `
[backends.lazy]
command = "FAKE"
start = "on-demand"
`)
	c := newRawClient(t, d.URL)
	testutil.Eventually(t, 30*time.Second, "the on-demand backend's tools", func() bool {
		return strings.Contains(c.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "lazy__echo")
	})
	traceID, _, body := tracedCall(t, c, 2, "lazy__echo")
	if !strings.Contains(body, `"isError"`) && !strings.Contains(body, "result") {
		t.Fatalf("call: %s", body)
	}
	sink.Await(t, 30*time.Second, "the wait for the start under the call's span", func(spans []otlpsink.Span, _ []otlpsink.Point) bool {
		server := spanWhere(spans, func(s otlpsink.Span) bool { return s.TraceID == traceID && s.Kind == "server" })
		wait := spanWhere(spans, func(s otlpsink.Span) bool { return s.TraceID == traceID && s.Name == "admission lazy" })
		return server != nil && wait != nil && wait.ParentID == server.SpanID && wait.Attrs["mcpgate.admission"] == "start"
	})
}

// A remote backend's OAuth token request made for a call (its token is
// due for renewal) is a span under the call's message to the backend;
// one made on no call's path is none.
func TestTraceOfAnOAuthTokenRequest(t *testing.T) {
	as := startAuthServer(t, 0, 3*time.Second, newKey(t, "k1"))
	bins := testutil.Build(t)
	upstream, upURL := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.a]
command = %q

[oauth.issuers.test]
issuer = %q

[clients.gateway]
oauth_subjects = ["gw"]
`, bins.Fake, as.Issuer), testutil.ConfigOptions{Auth: "required"})
	up := testutil.StartDaemon(t, upstream, upURL, testutil.DaemonOptions{})
	creds := t.TempDir()
	if err := os.WriteFile(creds+"/gw-secret", []byte(gwSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sink := otlpsink.Start(t)
	front, frontURL := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.up]
url = %[1]q
oauth_issuer = %[2]q
oauth_client_id = "gw"
oauth_client_secret_credential = "gw-secret"

[oauth.issuers.test]
issuer = %[2]q

[clients.svc]
oauth_subjects = ["svc"]

[telemetry]
traces = true
`, up.URL, as.Issuer), testutil.ConfigOptions{Auth: "required", Gateway: fmt.Sprintf("credentials_directory = %q", creds)})
	gw := testutil.StartDaemon(t, front, frontURL, testutil.DaemonOptions{Env: telemetryEnv(sink.URL)})
	resource, tokenEndpoint := discover(t, gw.URL)
	c := tokenSession(t, gw.URL, as.token(t, tokenEndpoint, "svc", svcSecret, resource, "mcp:read"))

	// Calls until one of them needed a new token (tokens live 3s).
	var token *otlpsink.Span
	var traces []string
	found := testutil.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		traceID, _, _ := tracedCall(t, c, len(traces)+10, "up__a__echo")
		traces = append(traces, traceID)
		token = spanWhere(sink.Spans(), named("oauth token up"))
		return token != nil
	})
	if !found {
		t.Fatalf("no call's token request was traced in %d calls:\n%s", len(traces), otlpsink.Describe(sink.Spans()))
	}
	var parent *otlpsink.Span
	sink.Await(t, 10*time.Second, "the token request's parent", func(spans []otlpsink.Span, _ []otlpsink.Point) bool {
		parent = spanWhere(spans, func(s otlpsink.Span) bool { return s.SpanID == token.ParentID })
		return parent != nil
	})
	if parent.Kind != "client" || parent.Attrs["mcpgate.backend"] != "up" || !slices.Contains(traces, token.TraceID) {
		t.Errorf("the token request is under %q (%s) of trace %s, want a call's client span to up", parent.Name, parent.Kind, token.TraceID)
	}
	if n := len(slices.DeleteFunc(sink.Spans(), func(s otlpsink.Span) bool { return s.Name != "oauth token up" || s.ParentID != "" })); n > 0 {
		t.Errorf("%d token requests on no call's path are spans of their own", n)
	}
}
