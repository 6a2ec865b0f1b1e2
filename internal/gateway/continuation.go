package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/access/reqstate"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// Continuations carry MCP 2026-07-28's multi round-trip requests over
// backends that speak 2025-11-25: when such a backend sends
// sampling/createMessage, elicitation/create or roots/list during a
// stateless tools/call, prompts/get or resources/read, the client's
// request is answered with an InputRequiredResult while the backend's call
// stays open, held here. The client's retry (a new request with the same
// method and name, inputResponses and the requestState it got) answers the
// backend's requests and takes the call's answer, or the next
// InputRequiredResult. A call whose client does not come back within the
// backend's client_request_timeout is cancelled at the backend.
//
// A continuation lives in this process's memory: a retry that reaches
// another host, or this one after a restart, is refused with an error
// that says so.
type Continuations struct {
	sealer       *reqstate.Sealer
	max          int // continuations at once; 0: no bound
	maxPerClient int // per client; 0: no bound
	log          *slog.Logger
	refusals     *access.Refusals

	mu       sync.Mutex
	byID     map[reqstate.ID]*continuation
	byStream map[*Stream]*continuation // by the stream of the client's first request
	clients  map[string]int            // continuations per client
}

// ContinuationOptions configure Continuations.
type ContinuationOptions struct {
	// Host names this host in requestState, so that a retry that reaches
	// another host is told where its call lives.
	Host string
	// Max bounds the calls waiting for a client's retry at once, and
	// MaxPerClient those of one client; 0 means no bound.
	Max, MaxPerClient int
	Logger            *slog.Logger
	// Refusals, if set, journals refused requestStates, rate-limited.
	Refusals *access.Refusals
}

// NewContinuations returns the handler of stateless clients' input
// (Options.Input), with a fresh key for requestState.
func NewContinuations(opts ContinuationOptions) *Continuations {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Continuations{
		sealer:       reqstate.New(opts.Host),
		max:          opts.Max,
		maxPerClient: opts.MaxPerClient,
		log:          opts.Logger,
		refusals:     opts.Refusals,
		byID:         map[reqstate.ID]*continuation{},
		byStream:     map[*Stream]*continuation{},
		clients:      map[string]int{},
	}
}

// continuation is one backend call of a stateless client that returned an
// InputRequiredResult, or is about to. Its fields are guarded by the
// Continuations' mu.
type continuation struct {
	t      *Continuations
	id     reqstate.ID
	client string
	// sealedTo is the client and identity its requestState is bound to
	// (Session.sealedTo): another identity of the same client is refused.
	sealedTo string
	binding  string        // the request the requestState is bound to
	call     *call         // the backend call, which outlives the client's requests
	first    *Stream       // the stream of the first request: the call's, diverted here
	timeout  time.Duration // the backend's client_request_timeout
	// instance is the pool instance (instance = "session") the call runs
	// on, taken from the first request's context when that request ends:
	// it stays bound to the call until the continuation ends.
	instance *backend.Backend

	round   uint64          // of the requestState a retry must bring
	caps    clientCaps      // of the client's latest request
	pending []*inputRequest // the backend's requests not answered yet, in order
	keys    int             // numbers the keys of inputRequests
	waiter  *waiter         // the client request the next answer goes to; nil while the client holds an InputRequiredResult
	asking  bool            // an InputRequiredResult is due once the backend's burst is read (askAfterBurst)
	answer  []byte          // the call's final answer, kept for the next retry; nil while it runs
	dropped bool            // the call ended without an answer
	timer   *time.Timer     // ends the continuation when the client does not retry
	ended   bool
	// roundOp is the span of the wait for the client's retry, nil
	// without tracing.
	roundOp *telemetry.Op
	// resend marks the continuation of a call that ended with the error
	// -32042: its retry is routed as a new call (urlelicit_stateless.go),
	// and its input requests have no backend request to answer.
	resend bool
}

// inputRequest is a request of the backend waiting for the client.
type inputRequest struct {
	key       string
	in        *Input // answers the backend
	method    string
	params    json.RawMessage
	presented bool // sent to the client in an InputRequiredResult
}

// waiter is a client request waiting for the call's next answer.
type waiter struct {
	sess   *Session
	id     json.RawMessage
	stream *Stream
	then   func(ok bool, size int) // the retry's audit, if any
}

var _ InputHandler = (*Continuations)(nil)

// maxInputsPerCall bounds the requests of one call that wait for its
// client at once: a backend cannot grow a continuation without bound.
const maxInputsPerCall = 32

// inputMethods are the requests that may be answered with an
// InputRequiredResult.
var inputMethods = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

// bindingOf is requestBinding of the request msg stands for: the call of
// its tool when it is a call of call_tool, so that a retry that names
// another tool resumes nothing.
func (s *Session) bindingOf(msg *jsonrpc.Message) string {
	if inner := s.metaCallTarget(msg); inner != nil {
		msg = inner
	}
	return requestBinding(msg)
}

// requestBinding is what a requestState of msg is bound to: the method and
// the tool, prompt or resource, as the client named it; "" for a method
// that cannot return an InputRequiredResult.
func requestBinding(msg *jsonrpc.Message) string {
	key, ok := inputMethods[msg.Method]
	if !ok {
		return ""
	}
	name, _, err := stringParam(msg.Params, key)
	if err != nil {
		return ""
	}
	return msg.Method + "\x00" + name
}

// HandleInput takes a backend's request during a stateless call: it
// becomes an inputRequest of the call's continuation, which answers the
// client's pending request with an InputRequiredResult.
func (t *Continuations) HandleInput(in *Input) {
	refuse := func(code int, format string, args ...any) {
		in.ReplyError(jsonrpc.Errorf(code, format, args...))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cont := t.byStream[in.Stream]
	if cont == nil {
		var why string
		cont, why = t.start(in)
		if cont == nil {
			refuse(jsonrpc.CodeInternalError, "mcpgate cannot ask the client for %s: %s", in.Request.Method, why)
			return
		}
	}
	if cont.ended {
		refuse(jsonrpc.CodeInternalError, "mcpgate cannot ask the client for %s: the call it belongs to has ended", in.Request.Method)
		return
	}
	if in.Session.g.draining.Load() {
		// Its retry would be refused: the client cannot answer.
		refuse(CodeShuttingDown, "mcpgate cannot ask the client for %s: the gateway is shutting down", in.Request.Method)
		return
	}
	if !cont.caps.hasFor(in.Request.Method, in.Request.Params) {
		refuse(jsonrpc.CodeMethodNotFound, "the client did not declare the capability %s needs", in.Request.Method)
		return
	}
	if len(cont.pending) >= maxInputsPerCall {
		refuse(jsonrpc.CodeInternalError, "mcpgate cannot ask the client for %s: %d requests of this call already wait for the client", in.Request.Method, maxInputsPerCall)
		return
	}
	cont.keys++
	cont.pending = append(cont.pending, &inputRequest{
		key:    inputKey(in.Request.Method, cont.keys),
		in:     in,
		method: in.Request.Method,
		params: jsonrpc.Compact(in.Request.Params),
	})
	if cont.waiter != nil && !cont.asking {
		// Once the backend's requests sent together are all here, and
		// inputGather after: one InputRequiredResult asks for them all.
		cont.asking = true
		in.Conn.AfterBurst(func() { time.AfterFunc(inputGather, func() { t.askAfterBurst(cont) }) })
	}
}

// inputGather is how long the requests a backend sends for one call are
// gathered, after it sent the first (and whatever it wrote with it),
// before the client is asked for them (mcpgated(8)): a 2025 server that
// sends several at once writes each on its own, and the client should get
// them in one InputRequiredResult, as from a 2026 server, not in one round
// trip each.
const inputGather = 20 * time.Millisecond

// askAfterBurst answers the waiting client request with an
// InputRequiredResult for the requests that came, unless the call ended or
// was answered meanwhile.
func (t *Continuations) askAfterBurst(cont *continuation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cont.asking = false
	if !cont.ended && cont.waiter != nil && len(cont.pending) > 0 {
		cont.inputRequired()
	}
}

// start makes the continuation of the stateless call that in belongs to,
// or says why there can be none.
func (t *Continuations) start(in *Input) (*continuation, string) {
	s := in.Session
	c := in.call
	if in.Stream != nil && in.Stream.internal {
		// Its answer is the step's, which the composite reads: an
		// InputRequiredResult there would reach no client.
		return nil, "a composite's step cannot ask the client for input"
	}
	if c == nil || c.stream != in.Stream || s.one == nil || s.one.request == nil {
		return nil, "no call of the client is in flight"
	}
	binding := s.bindingOf(s.one.request)
	if binding == "" {
		return nil, "only tools/call, prompts/get and resources/read can ask the client for input"
	}
	client := s.Client().Name
	if t.max > 0 && len(t.byID) >= t.max {
		t.log.Warn(fmt.Sprintf("refused %s of backend %q for client %q: max_input_required_calls (%d) calls already wait for their clients", in.Request.Method, in.Backend.Name(), client, t.max),
			"backend", in.Backend.Name(), "client", client, "method", in.Request.Method)
		return nil, fmt.Sprintf("%d calls already wait for their clients' input (max_input_required_calls)", t.max)
	}
	if t.maxPerClient > 0 && t.clients[client] >= t.maxPerClient {
		t.log.Warn(fmt.Sprintf("refused %s of backend %q for client %q: max_input_required_calls_per_client (%d) reached", in.Request.Method, in.Backend.Name(), client, t.maxPerClient),
			"backend", in.Backend.Name(), "client", client, "method", in.Request.Method)
		return nil, fmt.Sprintf("client %q already has %d calls waiting for its input (max_input_required_calls_per_client)", client, t.maxPerClient)
	}
	cont := &continuation{
		t:        t,
		id:       reqstate.NewID(),
		client:   client,
		sealedTo: s.sealedTo(),
		binding:  binding,
		call:     c,
		first:    in.Stream,
		timeout:  in.Backend.Config().InputRetry(),
		caps:     s.caps,
		waiter:   &waiter{sess: s, id: c.clientID, stream: in.Stream},
	}
	cont.instance = s.keepInstance(in.Conn.Backend())
	// The backend started answering: a fallback would repeat what it did.
	c.answering.Store(true)
	t.byID[cont.id] = cont
	t.byStream[in.Stream] = cont
	t.clients[client]++
	return cont, ""
}

// inputKey names an input request in inputRequests: unique within the
// continuation, and readable.
func inputKey(method string, n int) string {
	short := method
	switch method {
	case "sampling/createMessage":
		short = "sampling"
	case "elicitation/create":
		short = "elicitation"
	case "roots/list":
		short = "roots"
	}
	return short + "-" + strconv.Itoa(n)
}

// has reports whether the capabilities include the one method needs.
func (c clientCaps) has(method string) bool {
	switch method {
	case "sampling/createMessage":
		return c.Sampling != nil
	case "elicitation/create":
		return c.Elicitation != nil
	case "roots/list":
		return c.Roots != nil
	}
	return false
}

// cutOff ends every continuation, cancelling its call: the gateway stops.
func (t *Continuations) cutOff(why string) { t.endAll(why, false) }

// endWaiting ends the continuations whose client holds an
// InputRequiredResult, cancelling their calls; those with a retry in
// progress go on.
func (t *Continuations) endWaiting(why string) { t.endAll(why, true) }

func (t *Continuations) endAll(why string, onlyWaiting bool) {
	t.mu.Lock()
	var calls []*call
	var pending []*inputRequest
	var instances []*backend.Backend
	for _, cont := range t.byID {
		if onlyWaiting && cont.waiter != nil {
			continue
		}
		if !cont.resend { // that call is over
			calls = append(calls, cont.call)
		}
		pending = append(pending, cont.pending...)
		cont.pending = nil
		if inst := cont.takeInstance(); inst != nil {
			instances = append(instances, inst)
		}
		cont.end("")
	}
	t.mu.Unlock()
	// As in expire: the calls are cancelled before their requests fail,
	// and their instances are released last, as a session's are.
	for _, c := range calls {
		c.cancel(why)
	}
	for _, r := range pending {
		if r.in == nil {
			continue // an elicitation of an error -32042: nothing waits for it
		}
		r.in.ReplyError(jsonrpc.Errorf(CodeShuttingDown, "the client cannot answer %s: %s", r.method, why))
	}
	for _, inst := range instances {
		inst.Release()
	}
}

// keepInstance takes inst, the pool instance a stateless request's call
// runs on, out of the request's context, so that the request's end (once
// its InputRequiredResult is written) does not stop it: the call goes on
// there, and a later request of the backend's can only be the call's. It
// returns nil when inst is not one of the request's instances (a backend
// without a pool, or a request that ended already and released it).
func (s *Session) keepInstance(inst *backend.Backend) *backend.Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, bound := range s.instances {
		if bound == inst {
			delete(s.instances, name)
			return inst
		}
	}
	return nil
}

// takeInstance returns the continuation's instance, if any, which the
// caller releases once the call is cancelled.
func (cont *continuation) takeInstance() *backend.Backend {
	inst := cont.instance
	cont.instance = nil
	return inst
}
