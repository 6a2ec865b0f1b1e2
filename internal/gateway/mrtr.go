package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// MaxInputRounds bounds how often one call to a 2026-07-28 backend may
// answer with an input_required result that the gateway answers for a
// client session of an earlier protocol: a server that keeps asking fails
// the call instead of looping forever.
const MaxInputRounds = 8

// CodeMissingCapability is MCP 2026-07-28's error for a request that needs
// a client capability the client did not declare.
const CodeMissingCapability = -32021

// allDeclared is the default of client_capabilities, relayed.
var allDeclared = config.ClientCapabilities{Sampling: true, Elicitation: true, Roots: true}

// inputID numbers the requests the gateway sends to clients on behalf of
// a modern backend's input_required results; they share the relay table
// with the backends' own requests, keyed apart by a prefix no backend uses.
var inputID atomic.Int64

// inputRequired is the part of an InputRequiredResult the gateway acts on.
type inputRequired struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState json.RawMessage `json:"requestState"`
}

// inputRequiredValue is resultType's value in an InputRequiredResult.
var inputRequiredValue = []byte(`"input_required"`)

// isInputRequired reports whether result is an InputRequiredResult,
// without decoding more than its resultType.
func isInputRequired(result json.RawMessage) bool {
	// Its value is compared as written, so a result without these bytes
	// anywhere is none: one vectorised search instead of a scan of the
	// result's members, on every tool call's result.
	if !bytes.Contains(result, inputRequiredValue) {
		return false
	}
	v, _, ok := jsonrpc.Lookup(result, "resultType")
	return ok && string(v) == `"input_required"`
}

// translatesInput reports whether the call answers its backend's
// input_required results itself: a modern backend's call for a client
// session that knows no input_required (a 2025 session).
func (c *call) translatesInput() bool { return c.params != nil }

// askClient answers an input_required result of the backend for a 2025
// client: each input request goes to the client as a request on its
// session, and the call is repeated with the answers and the echoed
// requestState under a new id, until the backend answers in full. It runs
// on the backend's reader goroutine and does not block.
func (c *call) askClient(result json.RawMessage) {
	var ir inputRequired
	if err := json.Unmarshal(result, &ir); err != nil {
		c.fail(CodeBackendUnavailable, fmt.Sprintf("backend %q answered %s with a malformed input_required result: %v", c.b.Name(), c.method, err))
		return
	}
	c.rounds++
	if c.rounds > MaxInputRounds {
		c.fail(jsonrpc.CodeInternalError, fmt.Sprintf("backend %q asked for input more than %d times in one %s; mcpgate gave up", c.b.Name(), MaxInputRounds, c.method))
		return
	}
	cfg := c.b.Config()
	round := &inputRound{c: c, state: ir.RequestState, answers: map[string]json.RawMessage{}, left: len(ir.InputRequests)}
	type ask struct {
		key, method string
		params      json.RawMessage
	}
	var asks []ask
	for key, req := range ir.InputRequests {
		switch {
		case req.Method == "roots/list" && len(cfg.Roots) > 0:
			round.answers[key] = rootsResult(cfg.Roots)
			round.left--
		case !cfg.RelayClientRequests:
			c.fail(jsonrpc.CodeMethodNotFound, fmt.Sprintf("mcpgate does not relay %s for backend %q (relay_client_requests = false)", req.Method, c.b.Name()))
			return
		case req.Method != "sampling/createMessage" && req.Method != "elicitation/create" && req.Method != "roots/list":
			c.fail(jsonrpc.CodeInternalError, fmt.Sprintf("backend %q asked the client for %q, which is no input request", c.b.Name(), req.Method))
			return
		case !declares(cfg, req.Method):
			c.fail(CodeMissingCapability, fmt.Sprintf("backend %q asked the client for %s, a capability mcpgate does not declare to it (client_capabilities)", c.b.Name(), req.Method))
			return
		case !c.sess.mayAsk(req.Method, req.Params):
			c.fail(CodeMissingCapability, fmt.Sprintf("backend %q needs the client to answer %s, a capability the client did not declare", c.b.Name(), req.Method))
			return
		default:
			asks = append(asks, ask{key, req.Method, req.Params})
		}
	}
	if c.sess.g.opts.Telemetry != nil {
		round.op = c.roundOp(c.stream.op(c.clientID), c.rounds)
	}
	if round.left == 0 {
		round.retry()
		return
	}
	for _, a := range asks {
		key := a.key
		err := c.sess.relayTo(c.conn, a.method, a.params, c.stream, func(result, errObj json.RawMessage) {
			round.answer(key, result, errObj)
		})
		if err != nil {
			round.answer(key, nil, jsonrpc.Compact(json.RawMessage(`{"code":-32603,"message":`+string(jsonrpc.AppendString(nil, err.Error()))+`}`)))
		}
	}
	answering(c.conn, c.sess)
}

// inputRound is one round of answers to a backend's input requests.
type inputRound struct {
	c     *call
	state json.RawMessage // the backend's requestState, echoed; nil if none
	op    *telemetry.Op   // the round's span; nil without tracing

	mu      sync.Mutex
	answers map[string]json.RawMessage
	left    int
	failed  bool
}

// answer records the client's answer to input request key; the last one
// repeats the call. An error ends the call with it.
func (r *inputRound) answer(key string, result, errObj json.RawMessage) {
	r.mu.Lock()
	if r.failed {
		r.mu.Unlock()
		return
	}
	if errObj != nil {
		r.failed = true
		r.mu.Unlock()
		r.op.Fail("_OTHER", 0, "the client answered an input request with an error")
		if r.c.end() {
			r.c.stream.push(jsonrpc.AppendRawError(nil, r.c.clientID, errObj), true)
			r.c.sess.g.callEnded()
		}
		return
	}
	r.answers[key] = result
	r.left--
	done := r.left == 0
	r.mu.Unlock()
	if done {
		r.retry()
	}
}

// retry sends the call again with the round's answers, under a new id.
func (r *inputRound) retry() {
	c := r.c
	if c.ended.Load() {
		return
	}
	responses := []byte{'{'}
	first := true
	for key, res := range r.answers {
		if !first {
			responses = append(responses, ',')
		}
		first = false
		responses = jsonrpc.AppendString(responses, key)
		responses = append(responses, ':')
		responses = append(responses, jsonrpc.Compact(res)...)
	}
	responses = append(responses, '}')
	params, err := jsonrpc.SetMember(c.params, "inputResponses", responses)
	if err == nil && r.state != nil {
		params, err = jsonrpc.SetMember(params, "requestState", r.state)
	}
	if err != nil {
		r.op.Fail("_OTHER", 0, err.Error())
		c.fail(jsonrpc.CodeInternalError, fmt.Sprintf("cannot repeat %s with the client's input: %v", c.method, err))
		return
	}
	r.op.EndErr(nil)
	ctx := context.Background()
	if c.b.Config().OAuthTokenExchange {
		ctx = context.WithValue(ctx, backend.CallerKey{}, c.sess.caller())
	}
	ctx, cancel := context.WithTimeout(ctx, c.b.Config().Timeout)
	defer cancel()
	if c.sess.g.opts.Telemetry != nil {
		// The call's next message is one of its own, with its own span.
		op := c.sess.clientOp(c.clientID, c.method, c.stream, c.b, c.conn, params, forwardedParams{}, c.fb)
		c.op.Store(op)
		params = op.InjectMeta(params)
		ctx = telemetry.Carry(ctx, op.Context())
	}
	c.progressed() // the client's answer is progress: the call's timeout starts again
	bcall, err := c.conn.Go(ctx, c.method, params, c, c.deliver)
	if err != nil {
		c.op.Load().Fail(telemetry.ErrUnavailable, CodeBackendUnavailable, err.Error())
		c.fail(CodeBackendUnavailable, fmt.Sprintf("backend %q: %v", c.b.Name(), err))
		return
	}
	s := c.sess
	s.mu.Lock()
	c.bcall = bcall
	if !c.ended.Load() {
		c.armTimer()
	}
	unsent := c.unsent
	s.mu.Unlock()
	if unsent != "" {
		c.conn.Abandon(bcall, unsent) // cancelled while the client was asked
	}
}

// fail ends the call with an error of code, if it has not ended.
func (c *call) fail(code int, why string) {
	if c.end() {
		c.stream.push(errorResponse(c.clientID, code, "%s", why), true)
		c.sess.g.callEnded()
	}
}

// relayTo sends a request to the session's client on behalf of a modern
// backend's input_required result, on via if it is still open; answer
// gets the client's result or error object, or an error object when the
// client does not answer in time (client_request_timeout) or the session
// ends.
func (s *Session) relayTo(conn *backend.Conn, method string, params json.RawMessage, via *Stream, answer func(result, errObj json.RawMessage)) error {
	id := json.RawMessage(`"mcpgate-input-` + strconv.FormatInt(inputID.Add(1), 10) + `"`)
	return s.relayWith(conn, id, method, params, via, answer, nil)
}

// modernCall prepares a call to a modern backend: the client capabilities
// in its _meta are what this client can answer through the gateway, of
// what the backend may be told (client_capabilities; the backend adds the
// version and the rest, see backend.Conn.Go), the log level a 2025
// session set with logging/setLevel is the request's logLevel, and for a
// 2025 session the call keeps what it needs to answer input_required
// results itself. A stateless client's own capabilities and logLevel
// stand while the backend may be told all three.
func (s *Session) modernCall(c *call, method string, params json.RawMessage) json.RawMessage {
	cfg := c.b.Config()
	declared := cfg.Declared()
	if s.stateless && declared == allDeclared {
		return params
	}
	caps := []byte{'{'}
	add := func(key string, value json.RawMessage) {
		if value == nil {
			return
		}
		if len(caps) > 1 {
			caps = append(caps, ',')
		}
		caps = append(caps, `"`+key+`":`...)
		caps = append(caps, jsonrpc.Compact(value)...)
	}
	// What the client declared, of what the backend may be told (see
	// config.Backend.Declared); configured roots are answered here.
	if declared.Sampling {
		add("sampling", s.caps.Sampling)
	}
	if declared.Elicitation {
		add("elicitation", s.caps.Elicitation)
	}
	switch {
	case declared.Roots && len(cfg.Roots) > 0:
		add("roots", json.RawMessage(`{}`))
	case declared.Roots:
		add("roots", s.caps.Roots)
	}
	caps = append(caps, '}')
	meta, _, err := jsonrpc.Find(params, "_meta")
	if err == nil && (meta == nil || string(meta) == "null") {
		meta = json.RawMessage(`{}`)
	}
	if err == nil {
		meta, err = jsonrpc.SetMember(meta, "io.modelcontextprotocol/clientCapabilities", caps)
	}
	s.mu.Lock()
	prio := s.logLevel
	s.mu.Unlock()
	if err == nil && prio >= 0 && !s.stateless {
		meta, err = jsonrpc.SetMember(meta, MetaLogLevel, jsonrpc.AppendString(nil, mcpLevels[prio]))
	}
	if err == nil {
		params, err = jsonrpc.SetMember(params, "_meta", meta)
	}
	if err != nil {
		return params // ambiguous: the backend's own splice refuses it
	}
	if !s.stateless && (method == "tools/call" || method == "resources/read" || method == "prompts/get") {
		c.method, c.params = method, params
	}
	return params
}

// toModernBackend reports whether msg, a tools/call, prompts/get or
// resources/read, goes to a backend that speaks 2026-07-28 (a modern or
// dual one): the
// requestState and inputResponses of such a request are its backend's,
// carried through unchanged to it.
func (s *Session) toModernBackend(msg *jsonrpc.Message) bool {
	cat := s.g.Catalog()
	var name string
	switch msg.Method {
	case "tools/call":
		if n, _, err := stringParam(msg.Params, "name"); err == nil {
			if t, ok := cat.Tool(n); ok {
				name = t.Backend
			}
		}
	case "prompts/get":
		if n, _, err := stringParam(msg.Params, "name"); err == nil {
			if p, ok := cat.Prompt(n); ok {
				name = p.Backend
			}
		}
	case "resources/read":
		if uri, _, err := stringParam(msg.Params, "uri"); err == nil {
			name, _ = s.g.resourceOwner(cat, uri)
		}
	}
	return s.g.ownRequestState(name)
}

// ownRequestState reports whether the named backend issues the
// requestStates of its calls for stateless clients: one that speaks
// 2026-07-28, alone or beside an earlier version (see backend.EraDual).
func (g *Gateway) ownRequestState(name string) bool {
	b := g.registry.Backend(name)
	if b == nil {
		return false
	}
	era := b.Status().Server.Era()
	return era == backend.EraModern || era == backend.EraDual
}
