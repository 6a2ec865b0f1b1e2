package config

// Telemetry holds the [telemetry] table: what of OpenTelemetry mcpgate
// does. Everything else (where to export, how, the sampler, the service
// name) is the standard OTEL_* environment variables', set in a drop-in
// of mcpgate.service. Both keys are off by default.
type Telemetry struct {
	File string // where [telemetry] was defined, "" if nowhere
	Line int
	// Traces makes a span of every request a client sends and of every
	// message sent to a backend for it, continues the client's trace
	// context and passes it on to the backends, and exports the spans
	// (OTEL_TRACES_EXPORTER, default otlp).
	Traces bool
	// Metrics records the MCP duration histograms of the semantic
	// conventions: exported (OTEL_METRICS_EXPORTER, default otlp) and
	// served on metrics_listen's /metrics.
	Metrics bool
}

func telemetryFields() []field[Telemetry] {
	return []field[Telemetry]{
		{"traces", func(d *decoder, at keyPath, v any, t *Telemetry) bool {
			return d.boolean(at, v, &t.Traces)
		}},
		{"metrics", func(d *decoder, at keyPath, v any, t *Telemetry) bool {
			return d.boolean(at, v, &t.Metrics)
		}},
	}
}

// telemetry decodes the [telemetry] table of one file into t; keys set in
// later files override earlier ones.
func (d *decoder) telemetry(at keyPath, v any, t *Telemetry) {
	tab, ok := d.table(at, v, "a table", "write a [telemetry] header with its keys below it")
	if !ok {
		return
	}
	if t.File == "" {
		t.File, t.Line = d.f.path, d.f.lookup(at).line
	}
	decodeTable(d, at, tab, telemetryFields(), t)
}
