// Package otlpsink receives OTLP over HTTP in tests, and reads what an
// OpenTelemetry Collector's file exporter wrote: spans and histogram
// points, in one shape for both.
package otlpsink

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span received.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Name                      string
	Kind                      string            // "server", "client", "internal", …
	Attrs                     map[string]string // every value as text
	Error                     bool              // status ERROR
	StatusMessage             string
	Service                   string   // the resource's service.name
	Links                     []string // span ids linked to
}

// Point is one histogram data point received: the count and sum of the
// observations with its attributes, cumulative as exported.
type Point struct {
	Metric  string
	Attrs   map[string]string
	Count   uint64
	Sum     float64
	Service string
}

// Has reports whether every attribute of want is the point's.
func (p Point) Has(want map[string]string) bool { return hasAll(p.Attrs, want) }

// Has reports whether every attribute of want is the span's.
func (s Span) Has(want map[string]string) bool { return hasAll(s.Attrs, want) }

func hasAll(attrs, want map[string]string) bool {
	for k, v := range want {
		if got, ok := attrs[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Sink is an OTLP/HTTP receiver (protobuf, as the Go SDK's exporters send
// it) that keeps what it gets.
type Sink struct {
	URL string // the endpoint, for OTEL_EXPORTER_OTLP_ENDPOINT

	srv    *httptest.Server
	mu     sync.Mutex
	spans  []Span
	points []Point
	wake   chan struct{}
}

// Start runs a sink until the test ends.
func Start(t testing.TB) *Sink {
	t.Helper()
	s := &Sink{wake: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.traces)
	mux.HandleFunc("POST /v1/metrics", s.metrics)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

func (s *Sink) traces(w http.ResponseWriter, r *http.Request) {
	var req coltrace.ExportTraceServiceRequest
	if !decode(w, r, &req) {
		return
	}
	var got []Span
	for _, rs := range req.ResourceSpans {
		service := serviceOf(rs.Resource)
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				span := Span{TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId),
					ParentID: hex.EncodeToString(sp.ParentSpanId), Name: sp.Name, Kind: kindName(int(sp.Kind)),
					Attrs: attrsOf(sp.Attributes), Service: service}
				if sp.Status != nil {
					span.Error, span.StatusMessage = sp.Status.Code == 2, sp.Status.Message
				}
				for _, l := range sp.Links {
					span.Links = append(span.Links, hex.EncodeToString(l.SpanId))
				}
				got = append(got, span)
			}
		}
	}
	s.add(got, nil)
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(b)
}

func (s *Sink) metrics(w http.ResponseWriter, r *http.Request) {
	var req colmetric.ExportMetricsServiceRequest
	if !decode(w, r, &req) {
		return
	}
	var got []Point
	for _, rm := range req.ResourceMetrics {
		service := serviceOf(rm.Resource)
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				h, ok := m.Data.(*metricpb.Metric_Histogram)
				if !ok {
					continue
				}
				for _, dp := range h.Histogram.DataPoints {
					got = append(got, Point{Metric: m.Name, Attrs: attrsOf(dp.Attributes), Count: dp.Count, Sum: dp.GetSum(), Service: service})
				}
			}
		}
	}
	s.add(nil, got)
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&colmetric.ExportMetricsServiceResponse{})
	w.Write(b)
}

func decode(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = proto.Unmarshal(body, m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (s *Sink) add(spans []Span, points []Point) {
	s.mu.Lock()
	s.spans = append(s.spans, spans...)
	s.points = append(s.points, points...)
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// Spans returns the spans received so far.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spans)
}

// Points returns the latest point of every histogram series received so
// far (the exports are cumulative).
func (s *Sink) Points() []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Latest(s.points)
}

// Await waits until cond holds for what was received, checking again on
// each export, and fails the test after timeout.
func (s *Sink) Await(t testing.TB, timeout time.Duration, what string, cond func(spans []Span, points []Point) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		spans, points, wake := slices.Clone(s.spans), Latest(s.points), s.wake
		s.mu.Unlock()
		if cond(spans, points) {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s; received %d spans:\n%s", timeout, what, len(spans), Describe(spans))
		}
	}
}

// Latest keeps the point with the highest count of each series (metric
// and attributes): the last of cumulative exports.
func Latest(points []Point) []Point {
	best := map[string]int{}
	var out []Point
	for _, p := range points {
		k := p.Metric + "\x00" + p.Service + "\x00" + attrsKey(p.Attrs)
		if i, ok := best[k]; ok {
			if p.Count > out[i].Count {
				out[i] = p
			}
			continue
		}
		best[k] = len(out)
		out = append(out, p)
	}
	return out
}

func attrsKey(a map[string]string) string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + a[k] + "\x00")
	}
	return b.String()
}

// Describe lists spans one a line, for a failing test's message.
func Describe(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %q %s trace=%s span=%s parent=%s error=%v %v\n", s.Service, s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentID, s.Error, s.Attrs)
	}
	return b.String()
}

func serviceOf(r *resourcepb.Resource) string {
	if r == nil {
		return ""
	}
	return attrsOf(r.Attributes)["service.name"]
}

func attrsOf(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = valueText(kv.Value)
	}
	return out
}

func valueText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return fmt.Sprint(v.GetValue())
}

// kindName names an OTLP span kind.
func kindName(k int) string {
	switch k {
	case 1:
		return "internal"
	case 2:
		return "server"
	case 3:
		return "client"
	case 4:
		return "producer"
	case 5:
		return "consumer"
	}
	return "unspecified"
}
