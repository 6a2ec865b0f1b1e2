package itest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testing/otlpsink"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// The kinds of call of TestCollectorGetsOneTracePerCall beyond a plain
// call to each kind of backend.

// awaitTrace waits until the collector has at least n spans of the trace
// and returns them.
func awaitTrace(t *testing.T, c *collector, what, traceID string, n int) []otlpsink.Span {
	t.Helper()
	var spans []otlpsink.Span
	c.await(t, what, func(all []otlpsink.Span, _ []otlpsink.Point) bool {
		spans = inTrace(all, traceID)
		return len(spans) >= n
	})
	return spans
}

// mustSpan returns the one span of spans that match accepts, failing the
// test when there is none or more than one.
func mustSpan(t *testing.T, what string, spans []otlpsink.Span, match func(otlpsink.Span) bool) otlpsink.Span {
	t.Helper()
	var found []otlpsink.Span
	for _, s := range spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d spans, want 1, among\n%s", what, len(found), otlpsink.Describe(spans))
	}
	return found[0]
}

func gatewaySpan(kind, name string) func(otlpsink.Span) bool {
	return func(s otlpsink.Span) bool { return s.Service == "mcpgate" && s.Kind == kind && s.Name == name }
}

func serviceSpan(service string) func(otlpsink.Span) bool {
	return func(s otlpsink.Span) bool { return s.Service == service }
}

func childOf(t *testing.T, what string, child, parent otlpsink.Span) {
	t.Helper()
	if child.ParentID != parent.SpanID {
		t.Errorf("%s: span %q is the child of %s, want of %q (%s)", what, child.Name, child.ParentID, parent.Name, parent.SpanID)
	}
}

// checkStateless: a 2026-07-28 request's trace context comes in its
// _meta; its span has the era's version and no session. A backend of
// either era gets the client span's: a 2025 one with the era's _meta
// members cut out, the traceparent kept.
func checkStateless(t *testing.T, c *collector, d *testutil.Daemon) {
	for i, backend := range []string{"m", "l"} {
		tool := backend + "__test_image_content"
		traceID, spanID, tp := newTrace()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{},"_meta":{"traceparent":%q,`+
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, 40+i, tool, tp)
		resp, out := exchange(t, http.DefaultClient, d.URL, body, statelessHeaders(wideToken, "tools/call", tool)...)
		if resp.StatusCode != 200 || !strings.Contains(out, "image/png") {
			t.Fatalf("stateless tools/call %s: %s %s", tool, resp.Status, out)
		}
		spans := awaitTrace(t, c, "the stateless call's trace to "+backend, traceID, 3)
		server := mustSpan(t, "stateless: server span", spans, gatewaySpan("server", "tools/call "+tool))
		client := mustSpan(t, "stateless: client span", spans, gatewaySpan("client", "tools/call test_image_content"))
		own := mustSpan(t, "stateless: backend span", spans, serviceSpan("backend-"+backend))
		if server.ParentID != spanID {
			t.Errorf("stateless: the server span's parent is %s, want the client's span %s from _meta", server.ParentID, spanID)
		}
		childOf(t, "stateless to "+backend, client, server)
		childOf(t, "stateless to "+backend, own, client)
		if server.Attrs["mcp.protocol.version"] != "2026-07-28" || server.Attrs["mcp.session.id"] != "" {
			t.Errorf("stateless: server span %v; want mcp.protocol.version 2026-07-28 and no mcp.session.id", server.Attrs)
		}
	}
}

// checkFallback: each attempt is a client span of its own, the
// fallback's naming the backend that failed, the backend's span under it.
func checkFallback(t *testing.T, c *collector, wide *rawClient) {
	traceID, _, body := tracedCall(t, wide, 41, "down__test_image_content")
	if !strings.Contains(body, "image/png") || !strings.Contains(body, `"io.mcpgate/servedBy":"l"`) {
		t.Fatalf("fallback: %s; want l's image", body)
	}
	spans := awaitTrace(t, c, "the fallback's trace", traceID, 4)
	server := mustSpan(t, "fallback: server span", spans, gatewaySpan("server", "tools/call down__test_image_content"))
	attempts := 0
	for _, s := range spans {
		if s.Service != "mcpgate" || s.Kind != "client" {
			continue
		}
		attempts++
		childOf(t, "fallback", s, server)
		switch s.Attrs["mcpgate.backend"] {
		case "down":
			if !s.Error || s.Attrs["error.type"] != "unavailable" {
				t.Errorf("fallback: the attempt at down %v error=%v; want error.type unavailable", s.Attrs, s.Error)
			}
		case "l":
			if s.Attrs["mcpgate.fallback.from"] != "down" || s.Error {
				t.Errorf("fallback: the attempt at l %v; want mcpgate.fallback.from down, no error", s.Attrs)
			}
			childOf(t, "fallback", mustSpan(t, "fallback: l's span", spans, serviceSpan("backend-l")), s)
		}
	}
	if attempts != 2 {
		t.Errorf("fallback: %d client spans, want one per attempt (2):\n%s", attempts, otlpsink.Describe(spans))
	}
}

// checkComposite: each step is a span under the composite's, with the
// step's own client span and backend span under it.
func checkComposite(t *testing.T, c *collector, wide *rawClient) {
	traceID, _, body := tracedCall(t, wide, 42, "composite__both")
	if !strings.Contains(body, "simple text response") {
		t.Fatalf("composite: %s", body)
	}
	spans := awaitTrace(t, c, "the composite's trace", traceID, 7)
	server := mustSpan(t, "composite: server span", spans, gatewaySpan("server", "tools/call composite__both"))
	for i, step := range []struct{ tool, backend string }{{"m__test_simple_text", "m"}, {"r__test_simple_text", "r"}} {
		s := mustSpan(t, "composite: step "+step.tool, spans, gatewaySpan("internal", "tools/call "+step.tool))
		childOf(t, "composite step", s, server)
		if s.Attrs["mcpgate.composite"] != "both" || s.Attrs["mcpgate.composite.step"] != string(rune('0'+i)) {
			t.Errorf("composite: step span %v; want mcpgate.composite both, step %d", s.Attrs, i)
		}
		client := mustSpan(t, "composite: client span to "+step.backend, spans, func(x otlpsink.Span) bool {
			return x.Kind == "client" && x.Attrs["mcpgate.backend"] == step.backend
		})
		childOf(t, "composite client", client, s)
		childOf(t, "composite backend", mustSpan(t, "composite: backend-"+step.backend, spans, serviceSpan("backend-"+step.backend)), client)
	}
}

// checkErrors: a tool's error result and a JSON-RPC error say so on the
// spans, in the conventions' terms.
func checkErrors(t *testing.T, c *collector, wide *rawClient) {
	traceID, _, _ := tracedCall(t, wide, 43, "m__test_error_handling")
	spans := awaitTrace(t, c, "the failing tool's trace", traceID, 3)
	server := mustSpan(t, "tool error: server span", spans, gatewaySpan("server", "tools/call m__test_error_handling"))
	client := mustSpan(t, "tool error: client span", spans, gatewaySpan("client", "tools/call test_error_handling"))
	for _, s := range []otlpsink.Span{server, client} {
		if !s.Error || s.Attrs["error.type"] != "tool_error" {
			t.Errorf("tool error: span %q error=%v %v; want error.type tool_error", s.Name, s.Error, s.Attrs)
		}
	}
	if !mustSpan(t, "tool error: backend span", spans, serviceSpan("backend-m")).Error {
		t.Error("tool error: the backend's span is no error")
	}

	traceID, _, _ = tracedCall(t, wide, 44, "nosuch__tool")
	spans = awaitTrace(t, c, "the unknown tool's trace", traceID, 1)
	s := mustSpan(t, "unknown tool: server span", spans, gatewaySpan("server", "tools/call"))
	if !s.Error || s.Attrs["error.type"] != "-32602" || s.Attrs["rpc.response.status_code"] != "-32602" || !strings.Contains(s.StatusMessage, "unknown tool") {
		t.Errorf("unknown tool: span error=%v %q %v; want error.type and rpc.response.status_code -32602, the error's message", s.Error, s.StatusMessage, s.Attrs)
	}
	if len(spans) != 1 {
		t.Errorf("unknown tool: a backend was asked:\n%s", otlpsink.Describe(spans))
	}
}

// checkRefused: a call the client's policy refuses is one span that says
// refused and names neither the tool nor its backend.
func checkRefused(t *testing.T, c *collector, d *testutil.Daemon) {
	tight := tokenSession(t, d.URL, tightToken)
	traceID, _, body := tracedCall(t, tight, 45, "m__test_sampling")
	if !strings.Contains(body, `unknown tool`) {
		t.Fatalf("refused call: %s; want the unknown-tool error", body)
	}
	spans := awaitTrace(t, c, "the refused call's trace", traceID, 1)
	s := mustSpan(t, "refused: server span", spans, gatewaySpan("server", "tools/call"))
	if !s.Error || s.Attrs["error.type"] != "refused" || s.Attrs["mcpgate.refusal"] != "policy" || s.Attrs["mcpgate.client"] != "tight" {
		t.Errorf("refused: span error=%v %v; want error.type refused, mcpgate.refusal policy", s.Error, s.Attrs)
	}
	for _, sp := range spans {
		for k, v := range sp.Attrs {
			if strings.Contains(v, "test_sampling") || strings.Contains(sp.Name+sp.StatusMessage, "test_sampling") || k == "mcpgate.backend" || k == "gen_ai.tool.name" {
				t.Errorf("refused: span %q tells of the hidden tool (%s=%s, status %q)", sp.Name, k, v, sp.StatusMessage)
			}
		}
	}
	if len(spans) != 1 {
		t.Errorf("refused: more than the server span:\n%s", otlpsink.Describe(spans))
	}
	tight.do(t, "DELETE", "", nil) // its session's duration is measured
}

// traceHeader is an http.RoundTripper that sends a bearer token and one
// traceparent with every request of a session.
type traceHeader struct {
	token, traceparent string
}

func (h traceHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	r.Header.Set("traceparent", h.traceparent)
	return http.DefaultTransport.RoundTrip(r)
}

// checkInputRound: a 2025 session calling a 2026-07-28 backend that asks
// for input (the SDK client answers the elicitation) is one trace: the
// call's two messages to the backend, each a client span with the
// backend's span under it, and the input round between them.
func checkInputRound(t *testing.T, c *collector, d *testutil.Daemon) {
	traceID, _, tp := newTrace()
	opts := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}}
	cs := testutil.ConnectHTTP(t, d.URL, &http.Client{Transport: traceHeader{wideToken, tp}}, opts)
	res := testutil.MustCallTool(t, cs, "m__test_input_required_result_elicitation", nil)
	if got := testutil.ToolText(res); got != "Hello, Ada!" {
		t.Fatalf("input round: %q", got)
	}
	spans := awaitTrace(t, c, "the input round's trace", traceID, 6)
	server := mustSpan(t, "input round: server span", spans, gatewaySpan("server", "tools/call m__test_input_required_result_elicitation"))
	round := mustSpan(t, "input round: round span", spans, gatewaySpan("internal", "input_required m"))
	childOf(t, "input round", round, server)
	if round.Attrs["mcpgate.input.round"] != "1" {
		t.Errorf("input round: %v; want mcpgate.input.round 1", round.Attrs)
	}
	var clients int
	for _, s := range spans {
		if s.Service == "mcpgate" && s.Kind == "client" {
			clients++
			childOf(t, "input round: message", s, server)
		}
	}
	backends := 0
	for _, s := range spans {
		if s.Service == "backend-m" {
			backends++
			parent := spanWhere(spans, func(x otlpsink.Span) bool { return x.SpanID == s.ParentID })
			if parent == nil || parent.Kind != "client" {
				t.Errorf("input round: the backend's span %s is not under a client span", s.SpanID)
			}
		}
	}
	if clients != 2 || backends != 2 {
		t.Errorf("input round: %d client spans and %d backend spans, want 2 and 2:\n%s", clients, backends, otlpsink.Describe(spans))
	}
}

// checkHistograms: after the calls above and n more of one tool, the
// histograms of the conventions count them with their attributes.
func checkHistograms(t *testing.T, c *collector, wide *rawClient) {
	const n = 3
	for i := range n {
		tracedCall(t, wide, 50+i, "l__test_simple_text")
	}
	serverWant := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "l__test_simple_text", "gen_ai.operation.name": "execute_tool",
		"mcp.protocol.version": "2025-11-25", "network.transport": "tcp"}
	clientWant := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "test_simple_text", "mcpgate.backend": "l",
		"mcp.protocol.version": "2025-11-25", "network.transport": "pipe"}
	point := func(points []otlpsink.Point, metric string, want map[string]string) *otlpsink.Point {
		for i, p := range points {
			if p.Metric == metric && p.Service == "mcpgate" && p.Has(want) {
				return &points[i]
			}
		}
		return nil
	}
	c.await(t, "the histograms' counts", func(_ []otlpsink.Span, points []otlpsink.Point) bool {
		s, cl := point(points, "mcp.server.operation.duration", serverWant), point(points, "mcp.client.operation.duration", clientWant)
		return s != nil && s.Count == n+1 && cl != nil && cl.Count == n+1 &&
			point(points, "mcp.server.session.duration", map[string]string{"mcp.protocol.version": "2025-11-25", "network.transport": "tcp"}) != nil &&
			point(points, "mcp.client.session.duration", map[string]string{"error.type": "unavailable", "network.transport": "pipe"}) != nil
	})
	_, points := c.read(t)
	for _, want := range []struct {
		metric string
		attrs  map[string]string
		absent string
	}{
		{"mcp.server.operation.duration", map[string]string{"gen_ai.tool.name": "m__test_error_handling", "error.type": "tool_error"}, ""},
		{"mcp.client.operation.duration", map[string]string{"gen_ai.tool.name": "test_error_handling", "error.type": "tool_error", "mcpgate.backend": "m"}, ""},
		{"mcp.server.operation.duration", map[string]string{"error.type": "refused", "rpc.response.status_code": "-32602"}, "gen_ai.tool.name"},
		{"mcp.server.operation.duration", map[string]string{"mcp.method.name": "tools/call", "mcp.protocol.version": "2026-07-28", "gen_ai.tool.name": "m__test_image_content"}, ""},
		{"mcp.server.operation.duration", map[string]string{"mcp.method.name": "tools/call", "mcp.protocol.version": "2026-07-28", "gen_ai.tool.name": "l__test_image_content"}, ""},
	} {
		p := point(points, want.metric, want.attrs)
		if p == nil || p.Count != 1 || (want.absent != "" && p.Attrs[want.absent] != "") {
			t.Errorf("%s: no series of one call with %v (and without %s): %+v", want.metric, want.attrs, want.absent, p)
		}
	}
}

// checkBatch: a 2025-03-26 batch is a span per member, each the child of
// the span its POST's traceparent names, with its own request id, and the
// parent of its own client span to its backend.
func checkBatch(t *testing.T, c *collector, d *testutil.Daemon) {
	s := &rawClient{url: d.URL}
	old := map[string]string{"Authorization": "Bearer " + wideToken, "Mcp-Protocol-Version": "2025-03-26"}
	resp, body := s.do(t, "POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"batch","version":"1"}}}`, old)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize 2025-03-26: %s %s", resp.Status, body)
	}
	s.session = resp.Header.Get("Mcp-Session-Id")
	s.header = old
	s.do(t, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	traceID, spanID, tp := newTrace()
	resp, body = s.do(t, "POST", "["+callBody(61, "m__test_simple_text", `{}`)+","+callBody(62, "l__test_simple_text", `{}`)+"]", map[string]string{"traceparent": tp})
	if resp.StatusCode != 200 || strings.Count(body, "simple text response") != 2 {
		t.Fatalf("the batch: %s %s", resp.Status, body)
	}
	spans := awaitTrace(t, c, "the batch's trace", traceID, 6)
	for _, m := range []struct{ id, backend string }{{"61", "m"}, {"62", "l"}} {
		server := mustSpan(t, "the batch's member "+m.id, spans, gatewaySpan("server", "tools/call "+m.backend+"__test_simple_text"))
		if server.ParentID != spanID || server.Attrs["jsonrpc.request.id"] != m.id || server.Attrs["mcp.protocol.version"] != "2025-03-26" {
			t.Errorf("the batch's member %s: server span %v, parent %s; want the child of %s with its own id", m.id, server.Attrs, server.ParentID, spanID)
		}
		client := mustSpan(t, "the batch's member "+m.id+" to "+m.backend, spans, func(s otlpsink.Span) bool {
			return s.Service == "mcpgate" && s.Kind == "client" && s.Attrs["mcpgate.backend"] == m.backend
		})
		childOf(t, "the batch's member "+m.id, client, server)
	}
}
