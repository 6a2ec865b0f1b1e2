package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

type opKind uint8

const (
	opServer   opKind = iota // a request a client sent (SERVER span)
	opClient                 // a message to a backend (CLIENT span)
	opInternal               // what the gateway does on a call's path (INTERNAL span)
)

// Op is one operation measured: a span while tracing is on, and for
// requests and messages to backends a record in the duration histograms
// while metrics are. Its setters may be called from any goroutine until
// it ends; the first End or Fail ends it, later calls do nothing. A nil
// *Op does nothing.
type Op struct {
	t     *Telemetry
	kind  opKind
	span  trace.Span      // nil when tracing is off
	ctx   context.Context // holds span; nil when tracing is off
	start time.Time
	id    string // a server op's raw JSON-RPC id, for matching its answer

	mu        sync.Mutex
	ended     bool
	sentID    string // a client op's id toward the backend
	method    string // mcp.method.name, or an internal op's name
	target    string // the span name's target, when not the tool's or prompt's
	tool      string
	prompt    string
	uri       string
	session   string
	protocol  string
	transport string
	backend   string
	instance  int
	client    string
	identity  string
	refusal   string
	errType   string
	status    string // rpc.response.status_code
	message   string // the span status description
	extra     []attribute.KeyValue
}

// Server starts the op of a request a client sent: its span's parent is
// the trace context of params._meta (traceparent, tracestate, as
// SEP-414 puts them) if valid, else that of ctx (see Extract), linked to
// when both are there and differ. network.transport is ctx's connection
// (http.LocalAddrContextKey). The caller ends it with the answer (End).
func (t *Telemetry) Server(ctx context.Context, method string, id, params json.RawMessage) *Op {
	if t == nil {
		return nil
	}
	op := &Op{t: t, kind: opServer, start: time.Now(), method: method, id: string(id), transport: TransportOf(ctx)}
	if t.tracer != nil {
		parent, link := parentOf(ctx, params)
		opts := serverStart
		if link.IsValid() {
			opts = []trace.SpanStartOption{serverStart[0], trace.WithLinks(trace.Link{SpanContext: link})}
		}
		op.ctx, op.span = t.tracer.Start(parent, method, opts...)
	}
	return op
}

// The options spans start with, made once: the kind. The attributes come
// in one call when the span ends, and the SDK takes the times itself.
var (
	serverStart   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	clientStart   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	internalStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
)

// Client starts the op of a message sent to a backend on parent's
// behalf (the request it serves; nil for none).
func (t *Telemetry) Client(parent *Op, method string) *Op {
	if t == nil {
		return nil
	}
	op := &Op{t: t, kind: opClient, start: time.Now(), method: method}
	if t.tracer != nil {
		op.ctx, op.span = t.tracer.Start(parent.Context(), method, clientStart...)
	}
	return op
}

// Internal starts a span of what the gateway does on a call's path (name,
// such as "admission"; target, such as a backend, follows it in the span's
// name), a child of ctx's span. It is nil when tracing is off, and when
// ctx names no span: what is on no call's path is no span. Such spans
// have no histogram.
func (t *Telemetry) Internal(ctx context.Context, name, target string) *Op {
	if !t.Tracing() || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	op := &Op{t: t, kind: opInternal, start: time.Now(), method: name, target: target}
	spanName := name
	if target != "" {
		spanName += " " + target
	}
	op.ctx, op.span = t.tracer.Start(ctx, spanName, internalStart...)
	return op
}

// Context returns a context carrying the op's span, for what it causes
// (children, journal entries): the background without one.
func (o *Op) Context() context.Context {
	if o == nil || o.ctx == nil {
		return context.Background()
	}
	return o.ctx
}

// ID returns the raw JSON-RPC id of a server op's request.
func (o *Op) ID() string {
	if o == nil {
		return ""
	}
	return o.id
}

// Sampled reports whether the op's span is recorded and exported: only
// then is its trace context sent on.
func (o *Op) Sampled() bool {
	return o != nil && o.span != nil && o.span.SpanContext().IsSampled()
}

func (o *Op) set(fn func(o *Op)) {
	if o == nil {
		return
	}
	o.mu.Lock()
	if !o.ended {
		fn(o)
	}
	o.mu.Unlock()
}

// SetSession records the MCP session (of a 2025 client) and the protocol
// version the request or message speaks.
func (o *Op) SetSession(id, protocol string) {
	o.set(func(o *Op) { o.session, o.protocol = id, protocol })
}

// SetProtocol records the MCP protocol version.
func (o *Op) SetProtocol(protocol string) { o.set(func(o *Op) { o.protocol = protocol }) }

// SetTransport records network.transport: "pipe" for stdio, "tcp", "unix".
func (o *Op) SetTransport(transport string) { o.set(func(o *Op) { o.transport = transport }) }

// SetCaller records the client a request came from and who authenticated
// as it ("" without auth).
func (o *Op) SetCaller(client, identity string) {
	o.set(func(o *Op) { o.client, o.identity = client, identity })
}

// SetTool records the tool called: gen_ai.tool.name, and the span's
// target. Only a tool the caller may see is named (see Refused).
func (o *Op) SetTool(name string) { o.set(func(o *Op) { o.tool = name }) }

// SetPrompt records the prompt got (gen_ai.prompt.name).
func (o *Op) SetPrompt(name string) { o.set(func(o *Op) { o.prompt = name }) }

// SetResource records the resource read (mcp.resource.uri), on the span
// only: the histograms would not stay bounded.
func (o *Op) SetResource(uri string) { o.set(func(o *Op) { o.uri = uri }) }

// SetBackend records the backend (a pool's name) and the pool instance
// (0 for none) a message went to.
func (o *Op) SetBackend(name string, instance int) {
	o.set(func(o *Op) { o.backend, o.instance = name, instance })
}

// SetFallback marks a client op as a fallback's attempt at a call that
// backend from could not serve.
func (o *Op) SetFallback(from string) {
	o.set(func(o *Op) { o.extra = append(o.extra, FallbackFrom.String(from)) })
}

// SetComposite marks an op as step of composite.
func (o *Op) SetComposite(composite string, step int) {
	o.set(func(o *Op) { o.extra = append(o.extra, Composite.String(composite), Step.Int(step)) })
}

// SetAdmission records what an admission op waited for ("queue",
// "start", "instance").
func (o *Op) SetAdmission(what string) {
	o.set(func(o *Op) { o.extra = append(o.extra, Admission.String(what)) })
}

// SetRound records the number of an input round.
func (o *Op) SetRound(n int) { o.set(func(o *Op) { o.extra = append(o.extra, InputRound.Int(n)) }) }

// Refused marks a request the gateway refused by the client's policy:
// error.type "refused", and no tool, prompt, resource or backend named,
// whatever was set, so that the span tells nothing of what the client may
// not see.
func (o *Op) Refused() {
	o.set(func(o *Op) {
		o.refusal = "policy"
		o.tool, o.prompt, o.uri, o.backend, o.instance = "", "", "", "", 0
	})
}

// End ends the op with resp, the JSON-RPC response that answers it: an
// error's code is error.type and rpc.response.status_code, its message
// the span's status; a tools/call result with isError is a "tool_error".
// A nil resp ends it without an answer: cancelled.
func (o *Op) End(resp []byte) {
	if o == nil {
		return
	}
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		return
	}
	switch {
	case resp == nil:
		o.errType = ErrCancelled
	case o.refusal != "":
		o.errType, o.message = ErrRefused, "refused by the client's policy"
		if e := jsonrpc.ResponseError(resp); e != nil {
			o.status = errorCode(e)
		}
	default:
		if e := jsonrpc.ResponseError(resp); e != nil {
			o.setErrorLocked(e)
		} else if o.method == "tools/call" && bytes.Contains(resp, isErrorKey) {
			o.setToolErrorLocked(resp, "result", "isError")
		}
	}
	o.finishLocked()
}

// setErrorLocked records a JSON-RPC error object: its code as error.type
// and rpc.response.status_code ("_OTHER" without one), its message as the
// status description; o.mu is held.
func (o *Op) setErrorLocked(errObj json.RawMessage) {
	o.status = errorCode(errObj)
	o.errType = o.status
	if o.errType == "" {
		o.errType = "_OTHER"
	}
	if m, _, ok := jsonrpc.Lookup(errObj, "message"); ok {
		o.message, _ = jsonrpc.StringValue(m)
	}
}

// setToolErrorLocked marks a tools/call whose result has isError true,
// at path in raw; o.mu is held. Callers search the bytes for isErrorKey
// first: a result without the member's name is not walked.
func (o *Op) setToolErrorLocked(raw []byte, path ...string) {
	if v, _, ok := jsonrpc.LookupPath(raw, path...); ok && string(v) == "true" {
		o.errType = ErrToolError
	}
}

// EndResult ends a client op with the backend's answer to the message
// sent under id (jsonrpc.request.id): its result or error object.
func (o *Op) EndResult(id, result, errObj json.RawMessage) {
	if o == nil {
		return
	}
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		return
	}
	if len(id) > 0 {
		o.sentID = string(id)
	}
	switch {
	case errObj != nil:
		o.setErrorLocked(errObj)
	case o.method == "tools/call" && bytes.Contains(result, isErrorKey):
		o.setToolErrorLocked(result, "isError")
	}
	o.finishLocked()
}

// Fail ends the op with an error that is no answer of the peer's: errType
// (ErrTimeout, ErrUnavailable, …, or a JSON-RPC code the gateway answered
// with, code, when not 0) and message, the status description.
func (o *Op) Fail(errType string, code int, message string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		return
	}
	o.errType, o.message = errType, message
	if code != 0 {
		o.status = strconv.Itoa(code)
	}
	o.finishLocked()
}

// EndErr ends an internal op: failed with err's message, or succeeded
// when err is nil.
func (o *Op) EndErr(err error) {
	if o == nil {
		return
	}
	if err != nil {
		o.Fail("_OTHER", 0, err.Error())
		return
	}
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		return
	}
	o.finishLocked()
}

// finishLocked names and ends the span and records the duration; o.mu is
// held, and released.
func (o *Op) finishLocked() {
	o.ended = true
	end := time.Now()
	if o.span != nil && o.span.IsRecording() {
		o.endSpan()
	}
	if !o.t.metrics || o.kind == opInternal {
		o.mu.Unlock()
		return
	}
	key := seriesKey{client: o.kind == opClient, method: o.method, tool: o.tool, prompt: o.prompt, errType: o.errType,
		status: o.status, protocol: o.protocol, transport: o.transport}
	if key.client {
		key.backend = o.backend
	}
	o.mu.Unlock()
	o.t.record(key, end.Sub(o.start).Seconds())
}

// attrBufs hold the attributes of spans as they end: the SDK copies them.
var attrBufs = sync.Pool{New: func() any { b := make([]attribute.KeyValue, 0, 24); return &b }}

// endSpan sets the span's name, attributes and status, and ends it.
func (o *Op) endSpan() {
	switch { // named by its target: a step of a composite is an internal op with a tool
	case o.tool != "":
		o.span.SetName(o.method + " " + o.tool)
	case o.prompt != "":
		o.span.SetName(o.method + " " + o.prompt)
	}
	buf := attrBufs.Get().(*[]attribute.KeyValue)
	defer attrBufs.Put(buf)
	attrs := (*buf)[:0]
	str := func(k attribute.Key, v string) {
		if v != "" {
			attrs = append(attrs, k.String(v))
		}
	}
	if id := o.id + o.sentID; id != "" { // one of them, by the op's kind
		str(semconv.JSONRPCRequestIDKey, idString(id))
	}
	str(semconv.McpSessionIDKey, o.session)
	str(semconv.McpProtocolVersionKey, o.protocol)
	str(semconv.NetworkTransportKey, o.transport)
	str(semconv.GenAIToolNameKey, o.tool)
	str(semconv.GenAIPromptNameKey, o.prompt)
	str(semconv.McpResourceURIKey, o.uri)
	if o.method == "tools/call" && o.kind != opInternal {
		attrs = append(attrs, semconv.GenAIOperationNameExecuteTool)
	}
	str(semconv.ErrorTypeKey, o.errType)
	str(semconv.RPCResponseStatusCodeKey, o.status)
	str(Backend, o.backend)
	if o.instance > 0 {
		attrs = append(attrs, Instance.Int(o.instance))
	}
	str(Client, o.client)
	str(Identity, o.identity)
	str(Refusal, o.refusal)
	if o.kind != opInternal {
		attrs = append(attrs, semconv.McpMethodNameKey.String(o.method))
	}
	attrs = append(attrs, o.extra...)
	o.span.SetAttributes(attrs...)
	if o.errType != "" {
		o.span.SetStatus(codes.Error, o.message)
	}
	o.span.End()
	clear(attrs) // the span copied them
	*buf = attrs[:0]
}

// ServerSessionEnded records a client's session that lasted since start
// (mcp.server.session.duration).
func (t *Telemetry) ServerSessionEnded(start time.Time, protocol, transport string) {
	if t == nil || !t.metrics {
		return
	}
	var attrs [2]attribute.KeyValue
	n := sessionAttrs(&attrs, protocol, transport)
	t.serverSession.Record(context.Background(), time.Since(start).Seconds(), attrs[:n]...)
}

// ClientSessionEnded records the gateway's session with a backend that
// lasted since start (mcp.client.session.duration); errType, if not "",
// is why it ended (such as ErrUnavailable for a server that died).
func (t *Telemetry) ClientSessionEnded(start time.Time, protocol, transport, errType string) {
	if t == nil || !t.metrics {
		return
	}
	var attrs [2]attribute.KeyValue
	n := sessionAttrs(&attrs, protocol, transport)
	all := attrs[:n]
	if errType != "" {
		all = append(all, semconv.ErrorTypeKey.String(errType))
	}
	t.clientSession.Record(context.Background(), time.Since(start).Seconds(), all...)
}

func sessionAttrs(a *[2]attribute.KeyValue, protocol, transport string) int {
	n := 0
	if protocol != "" {
		a[n] = semconv.McpProtocolVersionKey.String(protocol)
		n++
	}
	if transport != "" {
		a[n] = semconv.NetworkTransportKey.String(transport)
		n++
	}
	return n
}

// TransportOf is network.transport of the connection ctx's HTTP request
// came on: "tcp" or "unix"; "" when ctx says nothing.
func TransportOf(ctx context.Context) string {
	addr, _ := ctx.Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return ""
	}
	if addr.Network() == "unix" {
		return "unix"
	}
	return "tcp"
}

// idString is jsonrpc.request.id of a raw id: a string's value, or the
// number as written.
func idString(raw string) string {
	if len(raw) > 0 && raw[0] == '"' {
		if s, ok := jsonrpc.StringValue(json.RawMessage(raw)); ok {
			return s
		}
	}
	return raw
}

// errorCode is the code of a JSON-RPC error object, as written.
func errorCode(errObj json.RawMessage) string {
	code, _, ok := jsonrpc.Lookup(errObj, "code")
	if !ok {
		return ""
	}
	return string(code)
}

var isErrorKey = []byte(`"isError"`)
