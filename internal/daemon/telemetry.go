package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// telemetryFlush bounds how long a stopping daemon waits for the spans
// and metrics still queued to reach the collector.
const telemetryFlush = 3 * time.Second

// startTelemetry sets up OpenTelemetry as [telemetry] and the OTEL_*
// environment say (nil d.tel when off), with the histograms on /metrics
// when metrics_listen serves it. It returns the function that flushes
// and stops it.
func (d *daemon) startTelemetry() (stop func(), err error) {
	var reg prometheus.Registerer
	if d.cfg.Gateway.MetricsListen != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"host": hostLabel()}, d.metrics.reg)
	}
	t := d.cfg.Telemetry
	d.tel, err = telemetry.New(telemetry.Config{
		Traces: t.Traces, Metrics: t.Metrics, Version: Version, Host: hostLabel(),
		Prometheus: reg, Logger: d.log,
	})
	if err != nil {
		return nil, fmt.Errorf("[telemetry]: %w; see mcpgated(8), TELEMETRY", err)
	}
	if d.tel == nil {
		return func() {}, nil
	}
	d.log.Info("OpenTelemetry is on", "traces", t.Traces, "metrics", t.Metrics)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), telemetryFlush)
		defer cancel()
		if err := d.tel.Shutdown(ctx); err != nil {
			d.log.Warn("OpenTelemetry: not everything queued reached the collector before mcpgated stopped", "err", err)
		}
	}, nil
}

// traceIDs is the journal's source of TRACE_ID= and SPAN_ID=, when
// cfg traces calls.
func traceIDs(cfg *config.Config) journal.TraceIDs {
	if !cfg.Telemetry.Traces {
		return nil
	}
	return telemetry.IDs
}

// warnTelemetryReload says that a reload leaves [telemetry] as it was.
func (d *daemon) warnTelemetryReload(next *config.Config) {
	if next.Telemetry.Traces != d.cfg.Telemetry.Traces || next.Telemetry.Metrics != d.cfg.Telemetry.Metrics {
		d.log.Warn("changes to the [telemetry] section take effect when mcpgated restarts")
	}
}
