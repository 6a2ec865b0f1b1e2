package gateway

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpgate/mcpgate/internal/access/reqstate"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// HandleRetry takes a stateless client's retry of a request that got an
// InputRequiredResult: a tools/call, prompts/get or resources/read with
// requestState. The client's policy is checked again and the retry is
// audited like any request; the requestState must be one this run of the
// gateway issued to this client, for this request, not expired and not
// used before, else the retry is refused with -32602 and journaled, and
// no backend sees it. The inputResponses answer the backend's requests;
// the retry gets the call's answer, or the next InputRequiredResult.
//
// Requests it does not take (another method, no requestState, a name the
// client may not use, a backend whose own requestState it is) are routed
// as usual, which refuses what must be.
func (t *Continuations) HandleRetry(s *Session, msg *jsonrpc.Message, stream *Stream) bool {
	binding := s.bindingOf(msg)
	raw, _, hasState := jsonrpc.Lookup(msg.Params, "requestState")
	if binding == "" || !hasState || checkDecided(msg.Method, msg.Params, true) != nil {
		return false
	}
	backendName, what, name, ok := s.visibleTarget(msg)
	if !ok || !s.g.issuesRequestState(backendName) {
		return false
	}
	token, isString := jsonrpc.StringValue(raw)
	var st reqstate.State
	err := error(&reqstate.Error{Reason: reqstate.Malformed})
	if isString {
		st, err = t.sealer.Open(token, s.sealedTo(), binding, time.Now())
	}
	if err != nil {
		t.refuse(s, msg, stream, err)
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cont := t.byID[st.ID]
	if cont == nil || cont.ended || cont.round != st.Round || cont.waiter != nil {
		t.refuse(s, msg, stream, &reqstate.Error{Reason: reqstate.Replayed})
		return true
	}
	cont.round++ // this requestState is used up
	if cont.timer != nil {
		cont.timer.Stop()
	}
	cont.roundOp.EndErr(nil) // the client came back
	cont.roundOp = nil
	if cont.resend {
		if err := cont.resent(msg); err != nil {
			t.refuse(s, msg, stream, &reqstate.Error{Reason: reqstate.Malformed})
			return true
		}
		return false // routed as a new call
	}
	w := &waiter{sess: s, id: msg.ID, stream: stream, then: s.audited(msg, stream, backendName, what, name)}
	cont.waiter = w
	cont.caps = s.caps
	switch {
	case cont.dropped:
		cont.waiter = nil
		stream.push(errorResponse(msg.ID, CodeBackendUnavailable, "the call ended at backend %q without an answer while mcpgate waited for this retry", cont.call.b.Name()), true)
		if w.then != nil {
			w.then(false, 0)
		}
		cont.end("")
		return true
	case cont.answer != nil:
		cont.deliver(w, cont.answer)
		cont.end("")
		return true
	}
	cont.answerBackend(msg.Params)
	if len(cont.pending) > 0 {
		cont.inputRequired() // asks again for what is missing, and for what came since
		return true
	}
	// The call goes on for this request: when the client goes away, the
	// request's end cancels it at the backend.
	s.mu.Lock()
	put(&s.calls, string(msg.ID), cont.call)
	s.mu.Unlock()
	return true
}

// answerBackend answers each of the backend's requests the client was
// shown and answered in inputResponses with a result object, and keeps
// the others.
func (cont *continuation) answerBackend(params json.RawMessage) {
	responses, _, ok := jsonrpc.Lookup(params, "inputResponses")
	if !ok || len(cont.pending) == 0 {
		return
	}
	keys := make([]string, len(cont.pending))
	for i, r := range cont.pending {
		keys[i] = r.key
	}
	values := make([]json.RawMessage, len(keys))
	if jsonrpc.FindEach(responses, keys, values) != nil {
		return // not an object, or ambiguous: the client is asked again
	}
	kept := cont.pending[:0]
	for i, r := range cont.pending {
		if v := values[i]; r.presented && len(v) > 0 && v[0] == '{' {
			r.in.Reply(jsonrpc.Compact(v))
			continue
		}
		kept = append(kept, r)
	}
	clear(cont.pending[len(kept):])
	cont.pending = kept
}

// visibleTarget finds the backend a retried request goes to and checks
// that the client's policy still lets it use the tool, prompt or resource;
// what and name are for the audit entry.
func (s *Session) visibleTarget(msg *jsonrpc.Message) (backendName, what, name string, ok bool) {
	cat := s.g.Catalog()
	v := s.view()
	if inner := s.metaCallTarget(msg); inner != nil {
		msg = inner // a retry of call_tool resumes the call of its tool
	}
	switch msg.Method {
	case "tools/call":
		name, _, _ = stringParam(msg.Params, "name")
		tool, found := cat.Tool(name)
		if !found {
			return "", "tool", name, false
		}
		return tool.Backend, "tool", name, v.tool(cat, name)
	case "prompts/get":
		name, _, _ = stringParam(msg.Params, "name")
		prompt, found := cat.Prompt(name)
		if !found {
			return "", "prompt", name, false
		}
		return prompt.Backend, "prompt", name, v.prompt(cat, name)
	case "resources/read":
		name, _, _ = stringParam(msg.Params, "uri")
		owner, found := s.g.resourceOwner(cat, name)
		return owner, "uri", name, found && v.resource(owner, name)
	}
	return "", "", "", false
}

// refuse answers a retry whose requestState is refused with -32602 (the
// spec's error for invalid params, as for an invalid cursor), and
// journals it, rate-limited per client.
func (t *Continuations) refuse(s *Session, msg *jsonrpc.Message, stream *Stream, err error) {
	reason := "refused"
	var e *reqstate.Error
	if errors.As(err, &e) {
		reason = e.Reason.String()
	}
	if t.refusals != nil {
		t.refusals.RequestState(s.op(msg, stream).Context(), s.who(), msg.Method, reason, err)
	}
	data := append(jsonrpc.AppendString([]byte(`{"reason":`), reason), '}')
	stream.push(jsonrpc.AppendError(nil, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: data}), true)
}

// issuesRequestState reports whether the gateway issued the requestStates
// of the named backend's calls: it does for every backend that speaks
// 2025-11-25 or earlier only. A backend that speaks 2026-07-28 (modern or
// dual) issues its own, which must pass through to it untouched.
func (g *Gateway) issuesRequestState(backendName string) bool {
	return backendName != "" && !g.ownRequestState(backendName)
}
