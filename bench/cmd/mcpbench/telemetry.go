package main

import (
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/mcpgate/mcpgate/bench/internal/gateways"
)

// telemetryScenario measures what OpenTelemetry costs: mcpgate as it
// ships (telemetry off) beside mcpgate-otel, which traces and measures
// every call (100% sampled) and exports to an OTLP receiver the bench
// serves, at 1 session and at 64.
func (b *bencher) telemetryScenario() error {
	sink := otlpSink()
	defer sink.Close()
	traced := gateways.Traced("mcpgate-otel", sink.URL)
	compared := []*gateways.Gateway{gateways.All()[0], gateways.All()[1], traced}
	if b.baseline != "" {
		// The baseline as it ships: a build older than [telemetry] would
		// not start with it.
		compared = append(compared, b.base(gateways.All()[1]))
	}
	return b.compare("telemetry", compared, 1, b.busy())
}

// otlpSink is an OTLP/HTTP receiver that takes every export and keeps
// nothing: an empty protobuf message is the answer to both kinds.
func otlpSink() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
}
