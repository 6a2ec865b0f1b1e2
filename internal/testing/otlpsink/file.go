package otlpsink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// The OTLP/JSON a collector's file exporter writes, one export a line:
// ids in hex, enums as numbers, 64-bit integers as strings.
type (
	fileLine struct {
		ResourceSpans   []fileResourceSpans   `json:"resourceSpans"`
		ResourceMetrics []fileResourceMetrics `json:"resourceMetrics"`
	}
	fileResource struct {
		Attributes []fileKV `json:"attributes"`
	}
	fileResourceSpans struct {
		Resource   fileResource `json:"resource"`
		ScopeSpans []struct {
			Spans []fileSpan `json:"spans"`
		} `json:"scopeSpans"`
	}
	fileSpan struct {
		TraceID      string   `json:"traceId"`
		SpanID       string   `json:"spanId"`
		ParentSpanID string   `json:"parentSpanId"`
		Name         string   `json:"name"`
		Kind         int      `json:"kind"`
		Attributes   []fileKV `json:"attributes"`
		Status       struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
		Links []struct {
			SpanID string `json:"spanId"`
		} `json:"links"`
	}
	fileResourceMetrics struct {
		Resource     fileResource `json:"resource"`
		ScopeMetrics []struct {
			Metrics []struct {
				Name      string `json:"name"`
				Histogram *struct {
					DataPoints []struct {
						Attributes []fileKV     `json:"attributes"`
						Count      json.Number  `json:"count"`
						Sum        *json.Number `json:"sum"`
					} `json:"dataPoints"`
				} `json:"histogram"`
			} `json:"metrics"`
		} `json:"scopeMetrics"`
	}
	fileKV struct {
		Key   string `json:"key"`
		Value struct {
			StringValue *string      `json:"stringValue"`
			IntValue    *json.Number `json:"intValue"`
			BoolValue   *bool        `json:"boolValue"`
			DoubleValue *json.Number `json:"doubleValue"`
		} `json:"value"`
	}
)

// ReadFile reads the spans and histogram points of a file the
// collector's file exporter wrote as JSON, one export a line; a last line
// still being written is left for the next read. Points are the latest
// of each series.
func ReadFile(path string) ([]Span, []Point, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var spans []Span
	var points []Point
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l fileLine
		if err := json.Unmarshal(line, &l); err != nil {
			if !bytes.HasSuffix(data, []byte("\n")) && bytes.HasSuffix(data, line) {
				break // the exporter is writing it
			}
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, rs := range l.ResourceSpans {
			service := fileAttrs(rs.Resource.Attributes)["service.name"]
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					span := Span{TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentSpanID, Name: s.Name, Kind: kindName(s.Kind),
						Attrs: fileAttrs(s.Attributes), Error: s.Status.Code == 2, StatusMessage: s.Status.Message, Service: service}
					for _, l := range s.Links {
						span.Links = append(span.Links, l.SpanID)
					}
					spans = append(spans, span)
				}
			}
		}
		for _, rm := range l.ResourceMetrics {
			service := fileAttrs(rm.Resource.Attributes)["service.name"]
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Histogram == nil {
						continue
					}
					for _, dp := range m.Histogram.DataPoints {
						n, _ := strconv.ParseUint(dp.Count.String(), 10, 64)
						p := Point{Metric: m.Name, Attrs: fileAttrs(dp.Attributes), Count: n, Service: service}
						if dp.Sum != nil {
							p.Sum, _ = dp.Sum.Float64()
						}
						points = append(points, p)
					}
				}
			}
		}
	}
	return spans, Latest(points), sc.Err()
}

func fileAttrs(kvs []fileKV) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case v.StringValue != nil:
			out[kv.Key] = *v.StringValue
		case v.IntValue != nil:
			out[kv.Key] = v.IntValue.String()
		case v.BoolValue != nil:
			out[kv.Key] = strconv.FormatBool(*v.BoolValue)
		case v.DoubleValue != nil:
			out[kv.Key] = v.DoubleValue.String()
		}
	}
	return out
}
