package telemetry

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP protocols of OTEL_EXPORTER_OTLP_PROTOCOL that mcpgate speaks.
const (
	protocolHTTP = "http/protobuf" // the default, as the specification gives it
	protocolGRPC = "grpc"
)

// protocol reads the OTLP protocol of a signal: its own variable
// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL), else the general one. The
// exporters read the endpoint, headers, timeout, compression and
// certificates from the environment themselves.
func protocol(getenv func(string) string, signal string) (string, error) {
	key := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	v := strings.TrimSpace(getenv(key))
	if v == "" {
		key = "OTEL_EXPORTER_OTLP_PROTOCOL"
		v = strings.TrimSpace(getenv(key))
	}
	switch v {
	case "", protocolHTTP:
		return protocolHTTP, nil
	case protocolGRPC:
		return protocolGRPC, nil
	}
	return "", fmt.Errorf("%s=%q: mcpgate exports OTLP as %s (the default) or %s", key, v, protocolHTTP, protocolGRPC)
}

// spanExporter is the OTLP exporter of spans the environment configures.
func spanExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	p, err := protocol(getenv, "TRACES")
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if p == protocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP span exporter (%s): %w", p, err)
	}
	return exp, nil
}

// metricExporter is the OTLP exporter of metrics the environment
// configures; the periodic reader takes its interval and timeout from
// OTEL_METRIC_EXPORT_INTERVAL and OTEL_METRIC_EXPORT_TIMEOUT.
func metricExporter(ctx context.Context, getenv func(string) string) (sdkmetric.Exporter, error) {
	p, err := protocol(getenv, "METRICS")
	if err != nil {
		return nil, err
	}
	var exp sdkmetric.Exporter
	if p == protocolGRPC {
		exp, err = otlpmetricgrpc.New(ctx)
	} else {
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter (%s): %w", p, err)
	}
	return exp, nil
}

// prometheusReader serves the metrics on the daemon's /metrics through
// reg: mcp.server.operation.duration as
// mcp_server_operation_duration_seconds, and so on. The resource is
// left out (the registry's own series carry the host), and so is the
// scope, which is mcpgate's for every series.
func prometheusReader(reg prometheus.Registerer) (sdkmetric.Reader, error) {
	r, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry metrics on /metrics: %w", err)
	}
	return r, nil
}
