package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testing/otlpsink"
)

// Tests export for real, over OTLP/HTTP to otlpsink, configured by the
// standard environment variables: they set the process's, so none runs
// in parallel.

// start sets up Telemetry exporting to a fresh sink, as the environment
// (pairs of key and value) also says.
func start(t *testing.T, cfg Config, env ...string) (*Telemetry, *otlpsink.Sink) {
	t.Helper()
	sink := otlpsink.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	tel, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel, sink
}

func TestOffUnlessAskedFor(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		env     map[string]string
		wantErr string
	}{
		{name: "both off", cfg: Config{}},
		{name: "OTEL_SDK_DISABLED wins", cfg: Config{Traces: true, Metrics: true}, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "OTEL_SDK_DISABLED garbage", cfg: Config{Traces: true}, env: map[string]string{"OTEL_SDK_DISABLED": "yes"}, wantErr: `OTEL_SDK_DISABLED="yes": use true or false`},
		{name: "unknown protocol", cfg: Config{Traces: true}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": mcpgate exports OTLP as http/protobuf (the default) or grpc`},
		{name: "a signal's protocol", cfg: Config{Metrics: true}, env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "thrift"},
			wantErr: `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="thrift"`},
		{name: "unknown exporter", cfg: Config{Traces: true}, env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			wantErr: `OTEL_TRACES_EXPORTER="zipkin": mcpgate exports with otlp, none`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			tt.cfg.Getenv = getenv
			for k, v := range tt.env {
				t.Setenv(k, v) // the exporters read the process's
			}
			tel, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || tel != nil {
				t.Fatalf("New = %v, %v; want nil, nil: off", tel, err)
			}
		})
	}
}

// Off, every hook is free: no allocation, whatever is called.
func TestOffCostsNothing(t *testing.T) {
	var tel *Telemetry
	params := json.RawMessage(`{"name":"x","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`)
	hdr := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	ctx := context.Background()
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	allocs := testing.AllocsPerRun(100, func() {
		op := tel.Server(tel.Extract(ctx, hdr), "tools/call", json.RawMessage("1"), params)
		op.SetTool("x")
		op.SetCaller("c", "i")
		c := tel.Client(op, "tools/call")
		if out := c.InjectMeta(params); &out[0] != &params[0] {
			t.Fatal("InjectMeta changed the params while off")
		}
		c.EndResult(nil, nil, nil)
		tel.Internal(op.Context(), "admission", "b").EndErr(nil)
		op.End(resp)
	})
	if allocs != 0 {
		t.Errorf("off: %v allocations per request, want 0", allocs)
	}
}

// InjectMeta splices the op's traceparent into _meta, keeping the rest
// byte for byte, and leaves what it cannot change alone.
func TestInjectMeta(t *testing.T) {
	tel, _ := start(t, Config{Traces: true})
	op := tel.Client(nil, "tools/call")
	defer op.EndErr(nil)
	tp := "00-" + op.span.SpanContext().TraceID().String() + "-" + op.span.SpanContext().SpanID().String() + "-01"
	tests := []struct{ params, want string }{
		{`{"name":"x"}`, `{"_meta":{"traceparent":"` + tp + `"},"name":"x"}`},
		{``, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`{}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`{"name":"x","_meta":null}`, `{"name":"x","_meta":{"traceparent":"` + tp + `"}}`},
		{`{"name":"x","_meta":{"progressToken":1}}`, `{"name":"x","_meta":{"traceparent":"` + tp + `","progressToken":1}}`},
		{`{"_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01","k":1}}`, `{"_meta":{"traceparent":"` + tp + `","k":1}}`},
		// Ambiguous or not an object: sent as it came.
		{`{"_meta":{},"_meta":{}}`, `{"_meta":{},"_meta":{}}`},
		{`{"_meta":"x"}`, `{"_meta":"x"}`},
	}
	for _, tt := range tests {
		if got := string(op.InjectMeta(json.RawMessage(tt.params))); got != tt.want {
			t.Errorf("InjectMeta(%s) = %s, want %s", tt.params, got, tt.want)
		}
	}
	unsampled, _ := start(t, Config{Traces: true}, "OTEL_TRACES_SAMPLER", "always_off")
	op2 := unsampled.Client(nil, "tools/call")
	if got := string(op2.InjectMeta(json.RawMessage(`{"name":"x"}`))); got != `{"name":"x"}` {
		t.Errorf("an unsampled op injected: %s", got)
	}
}

// A request's parent is the trace context of its _meta, else of its
// headers; with both, the headers' is a link.
func TestServerParent(t *testing.T) {
	tel, sink := start(t, Config{Traces: true})
	const (
		metaTrace, metaSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		hdrTrace, hdrSpan   = "11111111111111111111111111111111", "2222222222222222"
	)
	meta := json.RawMessage(`{"_meta":{"traceparent":"00-` + metaTrace + `-` + metaSpan + `-01","tracestate":"k=v"}}`)
	hdr := http.Header{"Traceparent": {"00-" + hdrTrace + "-" + hdrSpan + "-01"}}
	ctx := context.Background()
	tel.Server(tel.Extract(ctx, hdr), "both", json.RawMessage(`1`), meta).End(nil)
	tel.Server(tel.Extract(ctx, hdr), "header", json.RawMessage(`2`), json.RawMessage(`{}`)).End(nil)
	tel.Server(ctx, "meta", json.RawMessage(`3`), meta).End(nil)
	tel.Server(ctx, "none", json.RawMessage(`4`), nil).End(nil)
	var spans []otlpsink.Span
	sink.Await(t, 10*time.Second, "four server spans", func(s []otlpsink.Span, _ []otlpsink.Point) bool { spans = s; return len(s) == 4 })
	for _, want := range []struct {
		name, trace, parent, link string
	}{
		{"both", metaTrace, metaSpan, hdrSpan},
		{"header", hdrTrace, hdrSpan, ""},
		{"meta", metaTrace, metaSpan, ""},
		{"none", "", "", ""},
	} {
		for _, s := range spans {
			if s.Name != want.name {
				continue
			}
			if want.trace != "" && (s.TraceID != want.trace || s.ParentID != want.parent) || want.trace == "" && s.ParentID != "" {
				t.Errorf("%s: trace %s parent %s, want %s under %s", s.Name, s.TraceID, s.ParentID, want.trace, want.parent)
			}
			if got := strings.Join(s.Links, ","); got != want.link {
				t.Errorf("%s: links %q, want %q", s.Name, got, want.link)
			}
		}
	}
}

// An op's answer says how it went, in the conventions' terms, on the span
// and in the histogram.
func TestOutcomes(t *testing.T) {
	tel, sink := start(t, Config{Traces: true, Metrics: true})
	for _, tc := range []struct {
		id, resp string
		refused  bool
	}{
		{`"ok"`, `{"jsonrpc":"2.0","id":"ok","result":{"content":[]}}`, false},
		{`"tool"`, `{"jsonrpc":"2.0","id":"tool","result":{"content":[{"type":"text","text":"no"}],"isError":true}}`, false},
		{`"rpc"`, `{"jsonrpc":"2.0","id":"rpc","error":{"code":-32602,"message":"unknown tool \"y\""}}`, false},
		{`"late"`, `{"result":{"isError":false},"id":"late","jsonrpc":"2.0"}`, false},
		{`"refused"`, `{"jsonrpc":"2.0","id":"refused","error":{"code":-32602,"message":"unknown tool \"secret\""}}`, true},
		{`"gone"`, ``, false},
	} {
		op := tel.Server(context.Background(), "tools/call", json.RawMessage(tc.id), nil)
		op.SetTool("x")
		if tc.refused {
			op.Refused()
		}
		if tc.resp == "" {
			op.End(nil)
		} else {
			op.End([]byte(tc.resp))
		}
	}
	want := map[string]map[string]string{
		"ok":      {"gen_ai.tool.name": "x"},
		"tool":    {"error.type": "tool_error", "gen_ai.tool.name": "x"},
		"rpc":     {"error.type": "-32602", "rpc.response.status_code": "-32602"},
		"late":    {"gen_ai.tool.name": "x"},
		"refused": {"error.type": "refused", "mcpgate.refusal": "policy", "rpc.response.status_code": "-32602"},
		"gone":    {"error.type": "cancelled"},
	}
	sink.Await(t, 10*time.Second, "the six spans and their histogram", func(spans []otlpsink.Span, points []otlpsink.Point) bool {
		var n uint64
		for _, p := range points {
			if p.Metric == "mcp.server.operation.duration" {
				n += p.Count
			}
		}
		return len(spans) == 6 && n == 6
	})
	for _, s := range sink.Spans() {
		id := s.Attrs["jsonrpc.request.id"]
		if !s.Has(want[id]) || (want[id]["error.type"] != "") != s.Error {
			t.Errorf("%s: span %q error=%v %v; want %v", id, s.Name, s.Error, s.Attrs, want[id])
		}
		if id == "refused" && (s.Attrs["gen_ai.tool.name"] != "" || s.Name != "tools/call" || strings.Contains(s.StatusMessage, "secret")) {
			t.Errorf("refused: span %q %v status %q names what the client may not see", s.Name, s.Attrs, s.StatusMessage)
		}
		if id == "rpc" && s.StatusMessage != `unknown tool "y"` {
			t.Errorf("rpc: status %q, want the error's message", s.StatusMessage)
		}
	}
}
