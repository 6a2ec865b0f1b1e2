package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/access/reqstate"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// A 2025-11-25 backend's error -32042 (URL elicitations required) during
// a stateless call becomes an InputRequiredResult for the 2026-07-28
// client: each elicitation of the error's data an input request
// elicitation/create, its params unchanged. The backend's call is over;
// the client's retry, once its user completed them, is routed as a new
// call (policy, limits and audit as any), its requestState consumed and
// it and inputResponses left out of what the backend gets.

// urlRequired answers the stateless call c, which its backend answered
// with the error errObj, with an InputRequiredResult when the error is
// -32042, the backend's requestStates are the gateway's and the client
// declared elicitation.url. It reports false, doing nothing, otherwise:
// the error then goes to the client as it is.
func (g *Gateway) urlRequired(c *call, errObj json.RawMessage) bool {
	t, ok := g.opts.Input.(*Continuations)
	if !ok || !c.sess.stateless || !g.issuesRequestState(c.b.Name()) || !elicitationAllowed(c.sess.caps.Elicitation, "url") {
		return false
	}
	elicitations := requiredURLs(errObj)
	if len(elicitations) == 0 || len(elicitations) > maxInputsPerCall {
		return false
	}
	return t.urlRequired(c, elicitations)
}

func (t *Continuations) urlRequired(c *call, elicitations []json.RawMessage) bool {
	s := c.sess
	if s.one == nil || s.one.request == nil {
		return false
	}
	binding := requestBinding(s.one.request)
	client := s.Client().Name
	t.mu.Lock()
	defer t.mu.Unlock()
	if binding == "" || (t.max > 0 && len(t.byID) >= t.max) || (t.maxPerClient > 0 && t.clients[client] >= t.maxPerClient) {
		return false // the error as it is says what the backend needs
	}
	cont := &continuation{
		t:        t,
		id:       reqstate.NewID(),
		client:   client,
		sealedTo: s.sealedTo(),
		binding:  binding,
		call:     c,
		timeout:  c.b.Config().ClientRequestTimeout,
		caps:     s.caps,
		resend:   true,
	}
	for _, e := range elicitations {
		cont.keys++
		cont.pending = append(cont.pending, &inputRequest{
			key:    inputKey("elicitation/create", cont.keys),
			method: "elicitation/create",
			params: jsonrpc.Compact(e),
		})
	}
	t.byID[cont.id] = cont
	t.clients[client]++
	cont.waiter = &waiter{sess: s, id: c.clientID, stream: c.stream}
	cont.inputRequired()
	return true
}

// resent takes the retry msg of a continuation of an error -32042 (held,
// under t.mu): the continuation ends, and msg loses its requestState and
// inputResponses, to be routed as a new call. The error says why the
// params cannot be read; the retry is then refused.
func (cont *continuation) resent(msg *jsonrpc.Message) error {
	cont.end("")
	params, n := jsonrpc.AppendWithout(nil, msg.Params, []string{"requestState", "inputResponses"})
	if n == 0 {
		return fmt.Errorf("cannot read the retry's params")
	}
	msg.Params = params
	return nil
}
