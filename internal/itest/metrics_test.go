package itest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// scrape fetches /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return families
}

// value returns the value of the series of family whose labels include want.
func value(t *testing.T, families map[string]*dto.MetricFamily, family string, want map[string]string) float64 {
	t.Helper()
	f := families[family]
	if f == nil {
		t.Fatalf("no metric family %s", family)
	}
	for _, m := range f.Metric {
		match := 0
		for _, l := range m.Label {
			if want[l.GetName()] == l.GetValue() {
				match++
			}
		}
		if match != len(want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("%s has no series with labels %v", family, want)
	return 0
}

func TestMetricsCountTheCallsMade(t *testing.T) {
	port := testutil.FreePort(t)
	d := gatewayWith(t, fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port), `
[backends.m]
command = "FAKE"
rate_limit = "5/1h"
`)
	c := newRawClient(t, d.URL)
	for i := range 3 {
		c.post(t, callBody(i, "m__echo", `{"text":"ok"}`))
	}
	c.post(t, callBody(10, "m__error", `{}`))
	for i := range 3 { // 1 within the limit of 5, 2 refused
		c.post(t, callBody(20+i, "m__echo", `{"text":"limited"}`))
	}
	fams := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	for _, tc := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"mcpgate_calls_total", map[string]string{"backend": "m", "outcome": "ok"}, 4},
		{"mcpgate_calls_total", map[string]string{"backend": "m", "outcome": "error"}, 1},
		{"mcpgate_calls_total", map[string]string{"backend": "m", "outcome": "refused"}, 2},
		{"mcpgate_call_duration_seconds", map[string]string{"backend": "m"}, 5},
		{"mcpgate_backend_state", map[string]string{"backend": "m", "state": "healthy"}, 1},
		{"mcpgate_backend_state", map[string]string{"backend": "m", "state": "failed"}, 0},
		{"mcpgate_circuit_open", map[string]string{"backend": "m"}, 0},
		{"mcpgate_calls_in_flight", map[string]string{"backend": "m"}, 0},
		{"mcpgate_backend_restarts_total", map[string]string{"backend": "m"}, 0},
		{"mcpgate_sessions", nil, 1},
	} {
		if got := value(t, fams, tc.family, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.family, tc.labels, got, tc.want)
		}
	}
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes", "mcpgate_health_check_latency_seconds", "mcpgate_calls_queued", "mcpgate_fallbacks_total"} {
		if fams[family] == nil {
			t.Errorf("no %s", family)
		}
	}
	for name := range fams {
		if strings.Contains(name, "text") || strings.Contains(name, "limited") {
			t.Errorf("client data in metric %s", name)
		}
	}
}

// Metrics are off by default: nothing listens.
func TestMetricsOffByDefault(t *testing.T) {
	d := gateway(t, "[backends.m]\ncommand = \"FAKE\"\n")
	if strings.Contains(d.Stderr.String(), "serving Prometheus metrics") {
		t.Error("metrics served without metrics_listen")
	}
}
