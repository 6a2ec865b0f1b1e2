package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkCall is what telemetry adds to one tools/call: a server op, a
// client op with its context spliced into the params, both ended, with
// spans and histograms exported to a receiver that keeps nothing.
func BenchmarkCall(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
	tel, err := New(Config{Traces: true, Metrics: true, Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"x"}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}]}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		op := tel.Server(ctx, "tools/call", json.RawMessage("1"), params)
		op.SetSession("0123456789abcdef0123456789abcdef", "2025-11-25")
		op.SetCaller("anonymous", "")
		op.SetTool("echo")
		c := tel.Client(op, "tools/call")
		c.SetBackend("b", 0)
		c.SetTool("echo")
		c.SetProtocol("2025-11-25")
		c.SetTransport("pipe")
		c.InjectMeta(params)
		c.EndResult(json.RawMessage("7"), resp[34:len(resp)-1], nil)
		op.End(resp)
	}
}
