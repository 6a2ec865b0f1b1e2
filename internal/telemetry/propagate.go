package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Trace context travels as W3C Trace Context: in the traceparent and
// tracestate HTTP headers, and in the same keys of a request's
// params._meta, unprefixed, as SEP-414 and the MCP semantic conventions
// put it. The SDK's propagator reads and writes both.

// metaCarrier is a propagation.TextMapCarrier of the two keys, without a
// map.
type metaCarrier struct{ traceparent, tracestate string }

func (c *metaCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.traceparent
	case "tracestate":
		return c.tracestate
	}
	return ""
}

func (c *metaCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.traceparent = value
	case "tracestate":
		c.tracestate = value
	}
}

func (c *metaCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

var (
	traceparentKey = []byte(`"traceparent"`)
	metaKeys       = []string{"traceparent", "tracestate"}
)

// parentOf is the parent of a request's server span: the remote span of
// params._meta if it has a valid one, else ctx's (from the headers), and
// the span to link to when both are there and differ.
func parentOf(ctx context.Context, params json.RawMessage) (context.Context, trace.SpanContext) {
	header := trace.SpanContextFromContext(ctx)
	base := context.Background() // the request's context ends with it; its spans may not
	if bytes.Contains(params, traceparentKey) {
		var c metaCarrier
		var v [2]json.RawMessage
		if meta, _, err := jsonrpc.Find(params, "_meta"); err == nil && jsonrpc.FindEach(meta, metaKeys, v[:]) == nil {
			c.traceparent, _ = jsonrpc.StringValue(v[0])
			c.tracestate, _ = jsonrpc.StringValue(v[1])
		}
		if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(base, &c)); sc.IsValid() {
			var link trace.SpanContext
			if header.IsValid() && !header.Equal(sc) {
				link = header
			}
			return trace.ContextWithRemoteSpanContext(base, sc), link
		}
	}
	if header.IsValid() {
		return trace.ContextWithRemoteSpanContext(base, header), trace.SpanContext{}
	}
	return base, trace.SpanContext{}
}

// InjectMeta returns params with the op's trace context in its _meta
// (traceparent, and tracestate when there is one), replacing what the
// caller put there: the backend's spans are the op's children. The rest
// of params is kept byte for byte. params is returned as it is when the
// op's span is not sampled, and when its _meta cannot take members (not
// an object, or ambiguous).
func (o *Op) InjectMeta(params json.RawMessage) json.RawMessage {
	if !o.Sampled() {
		return params
	}
	var c metaCarrier
	propagation.TraceContext{}.Inject(o.ctx, &c)
	if c.traceparent == "" {
		return params
	}
	meta, span, err := jsonrpc.Find(params, "_meta")
	if err != nil {
		return params
	}
	if meta == nil || string(meta) == "null" {
		obj := []byte(`{"traceparent":`)
		obj = jsonrpc.AppendString(obj, c.traceparent)
		if c.tracestate != "" {
			obj = jsonrpc.AppendString(append(obj, `,"tracestate":`...), c.tracestate)
		}
		obj = append(obj, '}')
		if meta != nil {
			return jsonrpc.Replace(params, span, obj)
		}
		out, err := jsonrpc.PrependMembers(params, append([]byte(`"_meta":`), obj...))
		if err != nil {
			return params
		}
		return out
	}
	m, err := jsonrpc.SetMember(meta, "traceparent", jsonrpc.AppendString(nil, c.traceparent))
	if err == nil && c.tracestate != "" {
		m, err = jsonrpc.SetMember(m, "tracestate", jsonrpc.AppendString(nil, c.tracestate))
	}
	if err != nil {
		return params
	}
	return jsonrpc.Replace(params, span, m)
}

// Transport returns next sending the trace context of each request's
// context in its traceparent and tracestate headers, for the HTTP
// requests to remote backends (see Carry); next itself when tracing is
// off.
func (t *Telemetry) Transport(next http.RoundTripper) http.RoundTripper {
	if !t.Tracing() {
		return next
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &headerTransport{next: next}
}

type headerTransport struct{ next http.RoundTripper }

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || !sc.IsSampled() {
		return h.next.RoundTrip(req)
	}
	r := req.Clone(ctx) // a RoundTripper must not change the request it got
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header))
	return h.next.RoundTrip(r)
}

// CloseIdleConnections closes next's, as http.Client.CloseIdleConnections
// asks of its transport.
func (h *headerTransport) CloseIdleConnections() {
	if c, ok := h.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Carry returns dst carrying the span src carries, if any: a remote
// backend posts each request under a context of its session's, which
// must still name the call's span (for the headers, and as the parent of
// an OAuth token request made for it).
func Carry(dst, src context.Context) context.Context {
	span := trace.SpanFromContext(src)
	if !span.SpanContext().IsValid() {
		return dst
	}
	return trace.ContextWithSpan(dst, span)
}

// IDs returns the trace and span id of the span ctx carries, in hex, as
// the journal's TRACE_ID= and SPAN_ID= fields hold them.
func IDs(ctx context.Context) (traceID, spanID string, ok bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", "", false
	}
	return sc.TraceID().String(), sc.SpanID().String(), true
}
