// Package front serves the gateway to clients over MCP's Streamable HTTP
// transport.
package front

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// HTTP header names of the transport, as clients send them.
const (
	headerSession  = mcphttp.HeaderSession
	headerProtocol = mcphttp.HeaderProtocol
	headerLastID   = mcphttp.HeaderLastID
)

// Options configure a Handler.
type Options struct {
	Endpoint        string   // path of the MCP endpoint, e.g. "/mcp"
	MaxMessageBytes int64    // largest request body accepted
	AllowedOrigins  []string // Origins allowed besides local ones, e.g. "https://app.example.com"
	AllowedHosts    []string // Host header values allowed besides local ones
	// ResumeWindow is how long a request survives the loss of its event
	// stream, waiting for the client to resume it with Last-Event-ID.
	ResumeWindow time.Duration
	KeepAlive    time.Duration // idle time after which an event stream gets a comment
	// MaxConcurrentRequests bounds the POSTs processed at once, and so,
	// with MaxMessageBytes, the memory request bodies take; 0: no bound.
	MaxConcurrentRequests int
	// MaxBatchSize bounds the messages of one JSON-RPC batch; 0: no bound.
	// Each message of a batch counts against MaxConcurrentRequests and the
	// client's rate_limit as a POST of its own would.
	MaxBatchSize int
	Logger       *slog.Logger
	// Clients, if set, returns the clients in effect; every request must
	// come from one of them. Nil lets everyone in as client "anonymous".
	Clients func() *access.Set
	// Refusals journals refused callers and slows down repeated failures.
	Refusals *access.Refusals
	// Health, if set, answers GET HealthPath for load balancers.
	Health HealthFunc
	// Telemetry, if set, traces and measures every request (see
	// package telemetry): the trace context of its headers becomes the
	// parent of its span. Nil is off.
	Telemetry *telemetry.Telemetry
	// ServerCard is server_card of [gateway]: "identity" or "tools" serve
	// the server cards and the AI catalog (see servercard.go), "off" or
	// "" neither.
	ServerCard string
	// Version is mcpgate's version, as the server cards give it.
	Version string
}

// Handler is the http.Handler of the MCP endpoint.
type Handler struct {
	g     *gateway.Gateway
	opts  Options
	log   *slog.Logger
	slots chan struct{} // one token per POST in process; nil: no bound

	overloads *journal.Limiter // warnings of refusals for load; see warnRefused
}

// New returns the handler serving g.
func New(g *gateway.Gateway, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 25 * time.Second
	}
	h := &Handler{g: g, opts: opts, log: opts.Logger,
		overloads: journal.NewLimiter(time.Minute, overloadWarningsPerClient, overloadWarnings, overloadClients)}
	if opts.MaxConcurrentRequests > 0 {
		h.slots = make(chan struct{}, opts.MaxConcurrentRequests)
	}
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == HealthPath && h.opts.Health != nil && h.opts.Endpoint != HealthPath {
		h.health(w, r)
		return
	}
	// The path decides on the bytes as sent: a proxy in front routes and
	// checks those, not what percent-decoding them makes ("/%6dcp").
	profile, served := h.endpointOf(r.URL.Path)
	served = served && r.URL.RawPath == ""
	if !served && (h.serveMetadata(w, r) || h.serveCard(w, r)) {
		return
	}
	if !served {
		h.notFound(w, r.URL.Path)
		return
	}
	r = withProfile(r, profile)
	if !h.hostAllowed(r.Host) {
		h.httpError(w, http.StatusForbidden, "Host %q is not allowed; add it to allowed_hosts in the [gateway] section to serve it", r.Host)
		return
	}
	origin := r.Header.Get("Origin")
	if origin != "" {
		if !h.originAllowed(origin) {
			h.httpError(w, http.StatusForbidden, "Origin %q is not allowed; add it to allowed_origins in the [gateway] section to serve it", origin)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Expose-Headers", headerSession+", WWW-Authenticate")
		w.Header().Add("Vary", "Origin")
	}
	if r.Method != http.MethodOptions { // preflights carry no credentials
		if r = h.identify(w, r); r == nil {
			return
		}
	}
	switch r.Method {
	case http.MethodPost:
		if h.limited(w, r) {
			return
		}
		h.post(w, r)
	case http.MethodGet, http.MethodDelete:
		if get(r.Header, headerSession) == "" && modernHeader(r.Header) {
			h.sessionless(w, r)
			return
		}
		if r.Method == http.MethodGet {
			h.get(w, r)
		} else {
			h.delete(w, r)
		}
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Accept, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-Id, Mcp-Method, Mcp-Name")
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		h.httpError(w, http.StatusMethodNotAllowed, "method %s not allowed; use POST, GET or DELETE", r.Method)
	}
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	sse, plain := acceptsAnswers(r)
	if !sse && !plain {
		h.httpError(w, http.StatusNotAcceptable, "the Accept header must list application/json and text/event-stream")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" { // the common case parses nothing
		if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" {
			h.httpError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json, not %q", ct)
			return
		}
	}
	if !h.acquire(w, r) {
		return
	}
	held := true // a subscriptions/listen stream gives its slot back early
	defer func() {
		if held {
			h.release()
		}
	}()
	body, err := readBody(http.MaxBytesReader(w, r.Body, h.opts.MaxMessageBytes), r.ContentLength, h.opts.MaxMessageBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.rpcError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest,
				"message too large: the limit is %d bytes (max_message_bytes)", h.opts.MaxMessageBytes)
			return
		}
		h.httpError(w, http.StatusBadRequest, "reading the request body: %v", err)
		return
	}
	if !utf8.Valid(body) {
		// JSON is UTF-8 (RFC 8259); a backend must not get what its own
		// parser may mangle or refuse.
		h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: the body is not valid UTF-8, as JSON text must be")
		return
	}
	noSession := get(r.Header, headerSession) == ""
	if jsonrpc.IsBatch(body) {
		if noSession && modernHeader(r.Header) {
			h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "MCP %s has no batches: send each request in a POST of its own", gateway.ModernProtocolVersion)
			return
		}
		h.batch(w, r, body, sse)
		return
	}
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.AsError(err).Code, "%s", jsonrpc.AsError(err).Message)
		return
	}
	if noSession {
		// One pass over params finds what telling the eras apart, the
		// header checks and routing need.
		if head := gateway.ScanHead(msg.Params); isModern(r.Header, msg, &head) {
			h.stateless(w, r, msg, &head, sse, &held)
			return
		}
	}
	if msg.IsRequest() && msg.Method == "initialize" {
		h.initialize(w, r, msg)
		return
	}
	sess := h.session(w, r)
	if sess == nil {
		return
	}
	switch {
	case msg.IsNotification():
		sess.HandleNotification(msg)
		w.WriteHeader(http.StatusAccepted)
	case msg.IsResponse():
		sess.HandleResponse(msg)
		w.WriteHeader(http.StatusAccepted)
	default:
		st := sess.NewStream(1, sse)
		sess.HandleRequestContext(h.traceContext(r), msg, st)
		h.answer(w, r, sess, st, false)
	}
}

func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	client := clientOf(r)
	if r.Context().Err() != nil {
		// The client gave up (it waited in the listen backlog while the
		// daemon started): no session it would never use.
		h.log.Debug("initialize abandoned by the client before it was answered; no session started", "client", client.Name)
		return
	}
	op := h.opts.Telemetry.Server(h.traceContext(r), msg.Method, msg.ID, msg.Params)
	op.SetCaller(client.Name, identityOf(r))
	sess, result, err := h.g.NewSessionAt(msg.Params, client, identityOf(r), profileOf(r))
	if err != nil {
		failOp(op, err)
	}
	if h.limitError(w, err, msg.ID) {
		return
	}
	if err != nil {
		e := jsonrpc.AsError(err)
		if e.Code == gateway.CodeOverloaded {
			h.overloaded(w, msg.ID, "%s", e.Message)
			return
		}
		if e.Code == gateway.CodeShuttingDown {
			// 503 lets a balancer retry the initialize on another host.
			h.rpcError(w, http.StatusServiceUnavailable, msg.ID, e.Code, "%s; initialize again to reach another host", e.Message)
			return
		}
		h.rpcError(w, http.StatusOK, msg.ID, e.Code, "%s", e.Message)
		return
	}
	if h.log.Enabled(r.Context(), slog.LevelDebug) { // no message built per session for nobody
		h.log.Debug(fmt.Sprintf("session started for client %q", client.Name), "session", sess.ID, "protocol_version", sess.Protocol, "client", client.Name,
			"identity", sess.Identity())
	}
	w.Header().Set(headerSession, sess.ID)
	w.Header().Set("Content-Type", "application/json")
	resp := jsonrpc.AppendResult(nil, msg.ID, result)
	w.Write(resp)
	if op != nil {
		op.SetSession(sess.ID, sess.Protocol)
		op.End(resp)
		sess.SetTransport(telemetry.TransportOf(r.Context()))
	}
	// A client that closes its connection once it has the answer is
	// normal: only an answer that could not be written ends the session.
	if http.NewResponseController(w).Flush() != nil {
		h.g.CloseSession(sess.ID, "the client abandoned its initialize")
		h.log.Debug("initialize abandoned by the client; its session ended", "session", sess.ID, "client", client.Name)
	}
}

// batch handles a JSON array of messages, which only protocol 2025-03-26
// allows.
func (h *Handler) batch(w http.ResponseWriter, r *http.Request, body []byte, sse bool) {
	sess := h.session(w, r)
	if sess == nil {
		return
	}
	if sess.Protocol != "2025-03-26" {
		h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest,
			"batches are not supported in protocol version %s; only clients that negotiated 2025-03-26 may send them", sess.Protocol)
		return
	}
	items, err := jsonrpc.ParseBatch(body)
	if err != nil {
		e := jsonrpc.AsError(err)
		h.rpcError(w, http.StatusBadRequest, nil, e.Code, "%s", e.Message)
		return
	}
	if !h.admitBatch(w, r, len(items)) {
		return
	}
	defer h.releaseN(len(items) - 1)
	var requests []*jsonrpc.Message
	var invalid [][]byte
	for _, item := range items {
		msg, err := jsonrpc.Parse(item)
		switch {
		case err != nil:
			invalid = append(invalid, jsonrpc.AppendError(nil, nil, jsonrpc.AsError(err)))
		case msg.IsRequest() && msg.Method == "initialize":
			invalid = append(invalid, jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "initialize must not be part of a batch")))
		case msg.IsRequest():
			requests = append(requests, msg)
		case msg.IsNotification():
			sess.HandleNotification(msg)
		default:
			sess.HandleResponse(msg)
		}
	}
	if len(requests) == 0 && len(invalid) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := sess.NewStream(len(requests)+len(invalid), sse)
	for _, resp := range invalid {
		gateway.PushResponse(st, resp)
	}
	ctx := h.traceContext(r)
	for _, msg := range requests {
		sess.HandleRequestContext(ctx, msg, st)
	}
	h.answer(w, r, sess, st, true)
}

// session finds the session a request names, or answers the request with
// the error and returns nil.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) *gateway.Session {
	id := get(r.Header, headerSession)
	if id == "" {
		h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "missing %s header: send initialize first to start a session", headerSession)
		return nil
	}
	if h.g.Draining() {
		// A draining host's sessions are over for their clients: 404 makes
		// them initialize again, which a balancer sends to another host.
		h.rpcError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session %q not found: the gateway is shutting down; initialize a new session", id)
		return nil
	}
	sess := h.g.Session(id)
	if sess == nil || !owns(r, sess) || sess.Endpoint() != profileOf(r) { // another identity's (or endpoint's) session does not exist for this one
		h.rpcError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session %q not found: it ended or the gateway restarted; initialize a new session", id)
		return nil
	}
	if v := get(r.Header, headerProtocol); v != "" && !gateway.SupportsProtocolVersion(v) {
		h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "unsupported %s %q; this gateway speaks 2025-11-25, 2025-06-18 and 2025-03-26", headerProtocol, v)
		return nil
	}
	return sess
}

// contentTypeJSON is the Content-Type of a JSON answer, shared so that
// setting it allocates nothing; net/http only reads it.
var contentTypeJSON = []string{"application/json"}

// answer writes the answer to POSTed requests: plain JSON when nothing but
// the responses comes, else an event stream that starts as soon as the
// first other message (progress, a log message, a request to the client)
// is ready.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, sess *gateway.Session, st *gateway.Stream, batch bool) {
	ctx := r.Context()
	st.Attach()
	var room [1]gateway.Event // the common answer: one response, no allocation
	var one [1][]byte
	responses := one[:0]
	var after int64
	for {
		events, done, err := st.WaitAppend(ctx, after, room[:0])
		if err != nil {
			st.Detach(0) // nothing was streamed: the client cannot resume
			return
		}
		for _, e := range events {
			if !e.Final {
				// Switch to an event stream, replaying from the start:
				// nothing was written yet, not even earlier responses of a
				// batch.
				h.stream(w, r, sess, st, 0)
				return
			}
			responses = append(responses, e.Data)
		}
		if len(events) > 0 {
			after = events[len(events)-1].Seq
		}
		if done {
			break
		}
	}
	st.Ack(after)
	st.Detach(0)
	sess.StreamDone(st)
	w.Header()["Content-Type"] = contentTypeJSON
	if sess.Stateless() && len(responses) > 0 {
		w.WriteHeader(modernStatus(st.ErrorCode()))
	}
	switch {
	case len(responses) == 0:
		w.WriteHeader(http.StatusAccepted) // cancelled before it was answered
	case !batch:
		w.Write(responses[0])
	default:
		out := []byte{'['}
		for i, resp := range responses {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, resp...)
		}
		w.Write(append(out, ']'))
	}
}

// stream writes st as an event stream, starting after event seq after,
// until it ends or the client goes away. The stream must be attached.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, sess *gateway.Session, st *gateway.Stream, after int64) {
	ctx := r.Context()
	flusher, _ := w.(http.Flusher)
	hdr := w.Header()
	hdr.Set("Content-Type", mcphttp.MediaSSE)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	buf := []byte{}
	grace := h.opts.ResumeWindow
	if sess.Stateless() {
		grace = 0 // 2026-07-28 resumes nothing: a closed stream cancels its request
	} else if sess.Protocol >= "2025-11-25" {
		// A priming event gives the client an id to resume from before any
		// message arrived, and the retry field tells it how soon to do so.
		buf = fmt.Appendf(buf, "id: %d-%d\nretry: %d\ndata: \n\n", st.Key, after, retryMillis)
	}
	write := func() bool {
		_, err := w.Write(buf)
		buf = buf[:0]
		if flusher != nil {
			flusher.Flush()
		}
		return err == nil
	}
	// Headers (and the priming event) go out at once: clients wait for
	// them before they consider the stream open.
	if !write() {
		st.Detach(grace)
		return
	}
	// A finished stream stays resumable for the resume window too: the
	// client may not have received its last events. Detach forgets it then.
	defer st.Detach(grace)
	for {
		wctx, cancel := context.WithTimeout(ctx, h.opts.KeepAlive)
		events, done, err := st.Wait(wctx, after)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			buf = append(buf, ": keep-alive\n\n"...)
			if !write() {
				return
			}
			continue
		}
		for _, e := range events {
			if sess.Stateless() {
				buf = append(buf, "event: message\ndata: "...) // no id: nothing to resume
			} else {
				buf = fmt.Appendf(buf, "event: message\nid: %d-%d\ndata: ", st.Key, e.Seq)
			}
			buf = append(buf, e.Data...)
			buf = append(buf, "\n\n"...)
			after = e.Seq
		}
		if !write() {
			return
		}
		st.Ack(after)
		if done {
			return
		}
	}
}

// retryMillis is the reconnection delay suggested to clients that lose an
// event stream.
const retryMillis = 1000

// get opens the session's standalone event stream, or resumes a stream
// after the event the Last-Event-ID header names.
func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	if !accepts(r, mcphttp.MediaSSE) {
		h.httpError(w, http.StatusNotAcceptable, "GET opens an event stream: the Accept header must list text/event-stream")
		return
	}
	sess := h.session(w, r)
	if sess == nil {
		return
	}
	st, after := sess.Standalone(), int64(-1)
	if last := r.Header.Get(headerLastID); last != "" {
		if resumed, seq, ok := sess.ResumeStream(last); ok {
			st, after = resumed, seq
		}
	}
	if after < 0 {
		after = st.Acked()
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	if st == sess.Standalone() {
		st.Takeover(stop)
	}
	st.Attach()
	h.stream(w, r.WithContext(ctx), sess, st, after)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	sess := h.session(w, r)
	if sess == nil {
		return
	}
	h.g.CloseSession(sess.ID, "the client ended the session")
	w.WriteHeader(http.StatusOK)
}

// rpcError answers with a JSON-RPC error object and the given HTTP status.
func (h *Handler) rpcError(w http.ResponseWriter, status int, id []byte, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(jsonrpc.AppendError(nil, id, jsonrpc.Errorf(code, format, args...)))
}

// httpError answers a request that is not JSON-RPC at all, or not allowed.
func (h *Handler) httpError(w http.ResponseWriter, status int, format string, args ...any) {
	h.rpcError(w, status, nil, jsonrpc.CodeInvalidRequest, format, args...)
}

// acceptsAnswers is accepts of an event stream and of JSON, in one pass
// over the Accept header.
func acceptsAnswers(r *http.Request) (sse, plain bool) {
	for _, v := range r.Header["Accept"] {
		for part := range strings.SplitSeq(v, ",") { // per request: no allocation
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			mt = strings.TrimSpace(mt)
			all := mt == "*/*"
			sse = sse || all || mt == mcphttp.MediaSSE || isWildcardOf(mt, "text")
			plain = plain || all || mt == "application/json" || isWildcardOf(mt, "application")
		}
	}
	return sse, plain
}

// accepts reports whether the Accept header admits mediaType. A missing
// header admits nothing: MCP clients must send one.
func accepts(r *http.Request, mediaType string) bool {
	values := r.Header.Values("Accept")
	major, _, _ := strings.Cut(mediaType, "/")
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") { // per request: no allocation
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			mt = strings.TrimSpace(mt)
			if mt == mediaType || mt == "*/*" || isWildcardOf(mt, major) {
				return true
			}
		}
	}
	return false
}

// isWildcardOf reports whether mt is major+"/*", without building it.
func isWildcardOf(mt, major string) bool {
	rest, ok := strings.CutPrefix(mt, major)
	return ok && rest == "/*"
}

// isLocalHost reports whether host (without port) names this machine's
// loopback interface.
func isLocalHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func splitHost(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}

// hostAllowed protects against DNS rebinding: a browser tricked into
// talking to a local gateway sends the attacker's name as Host.
func (h *Handler) hostAllowed(host string) bool {
	if host == "" || isLocalHost(splitHost(host)) {
		return true
	}
	for _, a := range h.opts.AllowedHosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, splitHost(host)) {
			return true
		}
	}
	return false
}

func (h *Handler) originAllowed(origin string) bool {
	for _, a := range h.opts.AllowedOrigins {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && isLocalHost(splitHost(u.Host))
}
