// Package telemetry traces and measures mcpgate's calls with OpenTelemetry,
// in the names of the MCP semantic conventions: the SDK, its exporters and
// the conventions' names live here and nowhere else.
//
// The rest of mcpgate starts and ends an Op per MCP request it serves
// (Server), per message it sends a backend (Client) and per thing it does
// on a call's path that takes time (Internal); an Op is a span when
// tracing is on and a record in the conventions' duration histograms when
// metrics are. A nil *Telemetry is off: every method is a no-op that
// allocates nothing, and so is every method of a nil *Op.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of mcpgate's spans and metrics.
const ScopeName = "github.com/mcpgate/mcpgate"

// Config is what New needs: mcpgate's own choices ([telemetry] in
// mcpgate.toml(5)) and where the rest comes from.
type Config struct {
	// Traces turns on spans and the propagation of trace context;
	// Metrics the MCP duration histograms. Both off: New returns nil.
	Traces, Metrics bool
	// Version is mcpgate's, the resource's service.version.
	Version string
	// Host is the resource's host.name; "" leaves it to the environment.
	Host string
	// Getenv reads the OTEL_* environment variables; nil means
	// os.Getenv. The exporters and the SDK read theirs from the process
	// environment themselves.
	Getenv func(string) string
	// Prometheus, if set, is where the histograms (and the SDK's own
	// counters, such as the spans it dropped) are registered for
	// /metrics.
	Prometheus prometheus.Registerer
	// Logger gets what the SDK reports (an exporter that cannot reach
	// its collector), at most once a minute per kind of error.
	Logger *slog.Logger
}

// Telemetry is the SDK set up for mcpgate: providers, exporters and the
// instruments of the MCP semantic conventions.
type Telemetry struct {
	tracer  trace.Tracer // nil when traces are off
	tp      *sdktrace.TracerProvider
	mp      *sdkmetric.MeterProvider
	metrics bool // the MCP histograms are recorded

	serverOp      mcpconv.ServerOperationDuration
	clientOp      mcpconv.ClientOperationDuration
	serverSession mcpconv.ServerSessionDuration
	clientSession mcpconv.ClientSessionDuration
	series        seriesSets // the histograms' attribute sets, for reuse

	log *slog.Logger
}

// durationBuckets are the bucket boundaries the conventions give every
// MCP duration histogram, in seconds.
var durationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// New sets up the SDK as cfg and the OTEL_* environment say: nil, and no
// error, when both signals are off or OTEL_SDK_DISABLED is true. The
// exporters send in the background from bounded queues: a collector that
// is slow or gone costs calls nothing, and what cannot be queued is
// dropped and counted (otel.sdk.processor.span.processed with error.type
// queue_full). Shutdown flushes them.
func New(cfg Config) (*Telemetry, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if disabled, err := envBool(getenv, "OTEL_SDK_DISABLED"); err != nil {
		return nil, err
	} else if disabled || (!cfg.Traces && !cfg.Metrics) {
		if disabled && (cfg.Traces || cfg.Metrics) {
			cfg.Logger.Info("telemetry is on in [telemetry] but OTEL_SDK_DISABLED=true: no spans and no MCP histograms")
		}
		return nil, nil
	}
	ctx := context.Background()
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{metrics: cfg.Metrics, log: cfg.Logger}
	otel.SetErrorHandler(newErrorLog(cfg.Logger))

	// The meter provider also carries the SDK's own counters (dropped
	// spans), which it reports to the global one.
	var readers []sdkmetric.Option
	if cfg.Metrics {
		exporters, err := exporterList(getenv, "OTEL_METRICS_EXPORTER", "otlp", "prometheus")
		if err != nil {
			return nil, err
		}
		if exporters["otlp"] {
			exp, err := metricExporter(ctx, getenv)
			if err != nil {
				return nil, err
			}
			readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		}
	}
	if cfg.Prometheus != nil {
		r, err := prometheusReader(cfg.Prometheus)
		if err != nil {
			return nil, err
		}
		readers = append(readers, sdkmetric.WithReader(r))
	}
	t.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
	otel.SetMeterProvider(t.mp)
	if cfg.Metrics {
		if err := t.instruments(); err != nil {
			return nil, errors.Join(err, t.mp.Shutdown(ctx))
		}
	}

	if cfg.Traces {
		exporters, err := exporterList(getenv, "OTEL_TRACES_EXPORTER", "otlp")
		if err != nil {
			return nil, errors.Join(err, t.mp.Shutdown(ctx))
		}
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		if exporters["otlp"] {
			// The batch processor drops what its bounded queue cannot
			// take, never blocking a call, and counts it; the exporter
			// counts what it failed to send. Sizes and intervals are the
			// OTEL_BSP_* variables'.
			restore := countLostSpans(getenv)
			exp, err := spanExporter(ctx, getenv)
			if err == nil {
				opts = append(opts, sdktrace.WithBatcher(exp))
			}
			restore()
			if err != nil {
				return nil, errors.Join(err, t.mp.Shutdown(ctx))
			}
		}
		t.tp = sdktrace.NewTracerProvider(opts...)
		t.tracer = t.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(cfg.Version), trace.WithSchemaURL(semconv.SchemaURL))
	}
	return t, nil
}

// instruments makes the four duration histograms of the conventions.
func (t *Telemetry) instruments() error {
	m := t.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	buckets := metric.WithExplicitBucketBoundaries(durationBuckets...)
	var errs [4]error
	t.serverOp, errs[0] = mcpconv.NewServerOperationDuration(m, buckets)
	t.clientOp, errs[1] = mcpconv.NewClientOperationDuration(m, buckets)
	t.serverSession, errs[2] = mcpconv.NewServerSessionDuration(m, buckets)
	t.clientSession, errs[3] = mcpconv.NewClientSessionDuration(m, buckets)
	return errors.Join(errs[:]...)
}

// newResource describes this mcpgated: service.name mcpgate (unless
// OTEL_SERVICE_NAME says otherwise), its version and host, and what
// OTEL_RESOURCE_ATTRIBUTES adds.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName("mcpgate"), semconv.ServiceVersion(cfg.Version)}
	if cfg.Host != "" {
		attrs = append(attrs, semconv.HostName(cfg.Host))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return res, nil
}

// countLostSpans turns on the SDK's own metrics for the span exporter
// and the batch processor made until the returned function is called:
// the spans the processor dropped (otel.sdk.processor.span.processed,
// error.type queue_full) and those the exporter could not send
// (otel.sdk.exporter.span.exported with an error.type). The SDK reads the
// switch from the environment, when each part is made; the tracer, made
// after, counts no spans, which would cost a call more than its export
// (two counter updates a span). Set in the environment, the switch is
// left as it is.
func countLostSpans(getenv func(string) string) (restore func()) {
	if getenv("OTEL_GO_X_OBSERVABILITY") != "" || getenv("OTEL_GO_X_SELF_OBSERVABILITY") != "" {
		return func() {}
	}
	os.Setenv("OTEL_GO_X_OBSERVABILITY", "true")
	return func() { os.Unsetenv("OTEL_GO_X_OBSERVABILITY") }
}

// Tracing reports whether spans are made and trace context propagated.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracer != nil }

// Shutdown exports what is still queued, waiting until ctx ends at most,
// and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var err error
	if t.tp != nil {
		err = t.tp.Shutdown(ctx)
	}
	return errors.Join(err, t.mp.Shutdown(ctx))
}

// Extract returns ctx with the trace context of the W3C traceparent and
// tracestate headers in hdr as its remote parent: what a request's spans
// continue unless its _meta carries one (see Server).
func (t *Telemetry) Extract(ctx context.Context, hdr http.Header) context.Context {
	if !t.Tracing() || hdr.Get("Traceparent") == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(hdr))
}

// envBool reads a boolean OTEL_* variable: "" is false.
func envBool(getenv func(string) string, key string) (bool, error) {
	switch v := strings.TrimSpace(getenv(key)); strings.ToLower(v) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: use true or false", key, v)
	}
}

// exporterList reads an OTEL_*_EXPORTER variable, a comma-separated list
// of exporters: "otlp" (the default), "none", or one of also.
func exporterList(getenv func(string) string, key, def string, also ...string) (map[string]bool, error) {
	v := strings.TrimSpace(getenv(key))
	if v == "" {
		v = def
	}
	known := append([]string{"otlp", "none"}, also...)
	out := map[string]bool{}
	for name := range strings.SplitSeq(v, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		if !ok {
			return nil, fmt.Errorf("%s=%q: mcpgate exports with %s", key, v, strings.Join(known, ", "))
		}
		out[name] = true
	}
	return out, nil
}

// errorLog journals what the SDK reports, once a minute per message
// kind at most, with how many were left out: an exporter that cannot
// reach its collector reports every batch.
type errorLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	last map[string]time.Time
	left map[string]int
}

func newErrorLog(log *slog.Logger) *errorLog {
	return &errorLog{log: log, last: map[string]time.Time{}, left: map[string]int{}}
}

// Handle implements otel.ErrorHandler.
func (l *errorLog) Handle(err error) {
	msg := err.Error()
	kind, _, _ := strings.Cut(msg, ":")
	now := time.Now()
	l.mu.Lock()
	if now.Sub(l.last[kind]) < time.Minute {
		l.left[kind]++
		l.mu.Unlock()
		return
	}
	if len(l.last) >= 64 {
		clear(l.last) // bounded: a new kind every time cannot grow it
		clear(l.left)
	}
	suppressed := l.left[kind]
	l.last[kind], l.left[kind] = now, 0
	l.mu.Unlock()
	attrs := []any{"err", msg}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.log.Warn("OpenTelemetry: "+msg+"; further errors like it within a minute are counted, not logged", attrs...)
}
