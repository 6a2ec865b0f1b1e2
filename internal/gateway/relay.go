package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// relayed is a request a backend sent that was passed on to a client. It is
// pending while it is in the gateway's relays map: whoever takes it from
// there (the client's answer, the backend's cancellation, the timeout, the
// backend's exit, the session's end) ends it, once.
type relayed struct {
	sess      *Session
	clientID  int64
	conn      *backend.Conn
	backendID json.RawMessage
	method    string
	via       *Stream     // the stream the request went out on
	timer     *time.Timer // client_request_timeout; guarded by Gateway.relayMu
	// call is the client's call the request was attributed to, waiting
	// for the answer while the request is pending (see call.asked); nil
	// for the requests of a modern backend's input_required result.
	call *call
	// answer, if set, takes the client's answer instead of the backend:
	// the request stands for an input request of a modern backend's
	// input_required result (see relayTo).
	answer func(result, errObj json.RawMessage)
}

// reply passes the client's result on.
func (r *relayed) reply(result json.RawMessage) {
	if r.answer != nil {
		r.answer(result, nil)
		return
	}
	r.conn.Reply(r.backendID, result)
}

// replyError passes an error on in the client's place.
func (r *relayed) replyError(e *jsonrpc.Error) {
	if r.answer != nil {
		r.answer(nil, jsonrpc.Compact(errorObject(e)))
		return
	}
	r.conn.ReplyError(r.backendID, e)
}

// replyRawError passes the client's error object on.
func (r *relayed) replyRawError(errObj json.RawMessage) {
	if r.answer != nil {
		r.answer(nil, errObj)
		return
	}
	r.conn.ReplyRawError(r.backendID, errObj)
}

// errorObject is e as a JSON-RPC error object.
func errorObject(e *jsonrpc.Error) json.RawMessage {
	msg := jsonrpc.AppendError(nil, json.RawMessage("0"), e)
	obj, _, _ := jsonrpc.Lookup(msg, "error")
	return obj
}

// relay passes a backend's request on to this session's client, on the
// stream of c, the call it belongs to, if it is still open, else (or
// without a call: a dedicated instance's own request) on the standalone
// stream. The client has the backend's client_request_timeout
// to answer.
func (s *Session) relay(conn *backend.Conn, msg *jsonrpc.Message, c *call) error {
	var via *Stream
	if c != nil {
		via = c.stream
	}
	return s.relayWith(conn, append(json.RawMessage(nil), msg.ID...), msg.Method, msg.Params, via, nil, c)
}

// relayWith is relay for a request of backendID on conn, on via; answer,
// if set, takes the client's answer instead of the backend; c, if set, is
// the call that waits for the answer.
func (s *Session) relayWith(conn *backend.Conn, backendID json.RawMessage, method string, params json.RawMessage, via *Stream, answer func(result, errObj json.RawMessage), c *call) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("the client session ended")
	}
	s.nextRelay++
	r := &relayed{sess: s, clientID: s.nextRelay, conn: conn, backendID: backendID, method: method, via: via, answer: answer, call: c}
	c.asked()
	put(&s.relays, r.clientID, r)
	s.mu.Unlock()
	s.g.rememberRelay(r, conn.Backend().Config().ClientRequestTimeout)
	s.rememberRelayedURL(conn.Backend().Name(), method, params)
	s.send(jsonrpc.AppendRequest(nil, jsonrpc.IntID(r.clientID), method, params), via)
	return nil
}

func (g *Gateway) rememberRelay(r *relayed, timeout time.Duration) {
	g.relayMu.Lock()
	g.relays[relayKey{r.conn, string(r.backendID)}] = r
	r.timer = time.AfterFunc(timeout, func() { g.expireRelay(r, timeout) })
	g.relayMu.Unlock()
}

// takeRelay claims the pending request id of conn, or returns nil when it
// has ended already.
func (g *Gateway) takeRelay(conn *backend.Conn, id json.RawMessage) *relayed {
	g.relayMu.Lock()
	defer g.relayMu.Unlock()
	k := relayKey{conn, string(id)}
	r := g.relays[k]
	delete(g.relays, k)
	if r != nil {
		r.timer.Stop()
		r.call.answered() // before the backend can read the answer
	}
	return r
}

// expireRelay ends a request the client did not answer in time: the
// backend gets an error and the client notifications/cancelled.
func (g *Gateway) expireRelay(r *relayed, timeout time.Duration) {
	if g.takeRelay(r.conn, r.backendID) == nil {
		return
	}
	why := fmt.Sprintf("the client did not answer %s within %s (client_request_timeout of backend %q)", r.method, timeout, r.conn.Backend().Name())
	r.replyError(jsonrpc.Errorf(CodeTimeout, "%s", why))
	r.cancel(why)
}

// Exited cancels, toward their clients, the requests a backend's child
// sent that are still waiting: nobody is left to take the answer. It runs
// before the child's calls are failed, so the cancellation reaches the
// stream of the call that caused the request before that call's error.
func (g *Gateway) Exited(b *backend.Backend, conn *backend.Conn) {
	var gone []*relayed
	g.relayMu.Lock()
	for k, r := range g.relays {
		if k.conn == conn {
			delete(g.relays, k)
			r.timer.Stop()
			r.call.answered()
			gone = append(gone, r)
		}
	}
	g.relayMu.Unlock()
	for _, r := range gone {
		r.cancel(fmt.Sprintf("backend %q exited", b.Name()))
	}
	g.levelMu.Lock()
	delete(g.requestLevels, conn)
	g.levelMu.Unlock()
	g.tasks.connEnded(conn, fmt.Sprintf("backend %q's connection ended (it stopped, crashed or restarted), and the task with it", b.Name()))
}

// cancel forgets an ended request in its session and tells the client.
func (r *relayed) cancel(why string) {
	s := r.sess
	s.mu.Lock()
	delete(s.relays, r.clientID)
	s.mu.Unlock()
	params := jsonrpc.AppendString([]byte(`{"requestId":`+strconv.FormatInt(r.clientID, 10)+`,"reason":`), why)
	s.send(jsonrpc.AppendNotification(nil, "notifications/cancelled", append(params, '}')), r.via)
}
