package gateway

import (
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/access/reqstate"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// This file is a continuation's life: its InputRequiredResults, the
// call's answer going to the retry that waits for it, and its end.

// inputRequired answers the waiting client request with an
// InputRequiredResult that asks for every pending request, under a fresh
// requestState, and waits for the retry.
func (cont *continuation) inputRequired() {
	w := cont.waiter
	cont.waiter = nil
	cont.round++
	expires := time.Now().Add(cont.timeout)
	token := cont.t.sealer.Seal(reqstate.State{ID: cont.id, Round: cont.round, Expires: expires}, cont.sealedTo, cont.binding)
	out := []byte(`{"resultType":"input_required","inputRequests":{`)
	for i, r := range cont.pending {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonrpc.AppendString(out, r.key)
		out = append(out, `:{"method":`...)
		out = jsonrpc.AppendString(out, r.method)
		if len(r.params) > 0 {
			out = append(out, `,"params":`...)
			out = append(out, r.params...)
		}
		out = append(out, '}')
		r.presented = true
	}
	out = append(out, `},"requestState":`...)
	out = jsonrpc.AppendString(out, token)
	resp := jsonrpc.AppendResult(nil, w.id, append(out, '}'))
	cont.detach(w)
	if w.stream == cont.first {
		if !w.stream.divertAfter(resp, cont.fromCall) {
			// The call answered first: its answer is on the stream.
			cont.end("the call ended")
			return
		}
	} else {
		w.stream.push(resp, true)
	}
	if w.then != nil {
		w.then(true, len(resp))
	}
	round := cont.round
	// The call's own span goes on: the round is its child.
	cont.roundOp = cont.call.roundOp(cont.call.op.Load(), int(round))
	cont.timer = time.AfterFunc(cont.timeout, func() { cont.expire(round) })
}

// detach takes the call out of the waiting request's context, so that
// ending that request (once its answer is written) does not cancel it.
func (cont *continuation) detach(w *waiter) {
	s := w.sess
	s.mu.Lock()
	if s.calls[string(w.id)] == cont.call {
		delete(s.calls, string(w.id))
	}
	s.mu.Unlock()
}

// fromCall takes what the call pushes on its stream after the first
// InputRequiredResult: progress and log messages for the waiting request,
// and the call's answer (nil data: it ended without one).
func (cont *continuation) fromCall(data []byte, final bool) {
	t := cont.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if cont.ended {
		return
	}
	w := cont.waiter
	if !final {
		if w != nil {
			w.stream.push(data, false)
		}
		return
	}
	if w == nil {
		// The client holds an InputRequiredResult: its retry gets the answer.
		cont.answer, cont.dropped = data, data == nil
		cont.replyPending("the call it belongs to ended")
		return
	}
	cont.deliver(w, data)
	cont.end("the call it belongs to ended") // its requests that came with the answer
}

// deliver gives the call's answer to the waiting request, under its id.
func (cont *continuation) deliver(w *waiter, data []byte) {
	cont.waiter = nil
	cont.detach(w)
	if data == nil {
		w.stream.drop()
		if w.then != nil {
			w.then(false, 0)
		}
		return
	}
	if _, span, ok := jsonrpc.Lookup(data, "id"); ok {
		data = jsonrpc.Replace(data, span, w.id)
	}
	_, _, isError := jsonrpc.Lookup(data, "error")
	w.stream.push(data, true)
	if w.then != nil {
		w.then(!isError, len(data))
	}
}

// replyPending answers the backend's requests still waiting with an error
// saying why.
func (cont *continuation) replyPending(why string) {
	for _, r := range cont.pending {
		if r.in == nil {
			continue // an elicitation of an error -32042: nothing waits for it
		}
		r.in.ReplyError(jsonrpc.Errorf(jsonrpc.CodeInternalError, "the client did not answer %s: %s", r.method, why))
	}
	cont.pending = nil
}

// end forgets the continuation; the backend's requests still waiting get
// an error saying why. A pool instance it holds is released, as a
// session's is when the session ends, unless the caller took it first to
// release it after cancelling the call (takeInstance).
func (cont *continuation) end(why string) {
	if cont.ended {
		return
	}
	cont.ended = true
	if cont.timer != nil {
		cont.timer.Stop()
	}
	cont.roundOp.Fail(telemetry.ErrCancelled, 0, "the call ended before the client retried")
	if why != "" {
		cont.replyPending(why)
	}
	if inst := cont.takeInstance(); inst != nil {
		// Not under t.mu: releasing reports the pool's change.
		go inst.Release()
	}
	t := cont.t
	delete(t.byID, cont.id)
	delete(t.byStream, cont.first)
	if t.clients[cont.client]--; t.clients[cont.client] <= 0 {
		delete(t.clients, cont.client)
	}
}

// expire ends a continuation whose client did not retry within the
// backend's client_request_timeout: the backend's requests get an error
// and the call is cancelled at the backend.
func (cont *continuation) expire(round uint64) {
	t := cont.t
	t.mu.Lock()
	if cont.ended || cont.waiter != nil || cont.round != round {
		t.mu.Unlock()
		return // a retry came
	}
	if cont.resend { // the call is over: nothing to cancel
		cont.end("")
		t.mu.Unlock()
		return
	}
	why := fmt.Sprintf("the client did not retry within %s (%s of backend %q)", cont.timeout, retryKey(cont.call.b.Config()), cont.call.b.Name())
	pending := cont.pending
	cont.pending = nil
	inst := cont.takeInstance()
	cont.end("")
	t.mu.Unlock()
	t.log.Info(fmt.Sprintf("cancelled a call of client %q at backend %q: %s", cont.client, cont.call.b.Name(), why),
		"client", cont.client, "backend", cont.call.b.Name(), "request", cont.call.sess.RequestID())
	// The call is cancelled before its requests are answered: a backend
	// that answers its call as soon as a request fails must not win the
	// race with notifications/cancelled. Its end comes back to fromCall,
	// which ignores it.
	cont.call.cancel(why)
	for _, r := range pending {
		r.in.ReplyError(jsonrpc.Errorf(CodeTimeout, "%s", why))
	}
	if inst != nil {
		inst.Release() // after the cancellation, as when a session ends
	}
}

// retryKey names the key that bounds how long a call of the backend of
// cfg waits for its stateless client's retry (config.Backend.InputRetry).
func retryKey(cfg *config.Backend) string {
	if cfg.InputRetryTimeout > 0 {
		return "input_retry_timeout"
	}
	return "client_request_timeout"
}

// divertAfter pushes resp as the stream's answer and from then on hands
// fn what is pushed on the stream (and a drop, as nil data): the call
// whose stream it is goes on after its client got an InputRequiredResult.
// It reports false, pushing nothing, when the stream has ended already.
func (s *Stream) divertAfter(resp []byte, fn func(data []byte, final bool)) bool {
	resp = jsonrpc.OneLine(resp)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.divert != nil || !s.pushLocked(resp, true) {
		return false
	}
	s.divert = fn
	return true
}
