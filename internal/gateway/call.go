package gateway

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// call is a client's request forwarded to a backend.
type call struct {
	sess     *Session
	clientID json.RawMessage
	stream   *Stream
	b        *backend.Backend
	conn     *backend.Conn
	bcall    *backend.Call
	timer    *time.Timer

	token       int64           // our progress token toward the backend, 0 if none
	clientToken json.RawMessage // the client's progress token
	unsent      string          // why the call was given up before bcall was set; guarded by sess.mu

	// then, if set, learns whether the backend accepted the request once
	// the call ends.
	then      func(ok bool)
	succeeded atomic.Bool

	fb        *fallback   // where the call may go when the backend dies before answering
	answering atomic.Bool // the backend sent something for the call: no fallback any more

	ended atomic.Bool
	once  sync.Once // guards the bookkeeping in end
}

// deliver receives the backend's answer, on the backend's reader goroutine.
func (c *call) deliver(resp *jsonrpc.Message, err error) {
	c.succeeded.Store(err == nil && resp.Error == nil)
	if !c.end() {
		return
	}
	switch {
	case errors.Is(err, backend.ErrTooLarge):
		c.stream.push(errorResponse(c.clientID, CodeMessageTooLarge, "%v", err), true)
	case err != nil:
		if !c.answering.Load() && c.fb.try(c.sess, c.b, err) {
			return
		}
		c.stream.push(errorResponse(c.clientID, CodeBackendUnavailable, "%v", err), true)
	case resp.Error != nil:
		c.stream.push(jsonrpc.AppendRawError(nil, c.clientID, resp.Error), true)
	default:
		c.stream.push(jsonrpc.AppendResult(nil, c.clientID, c.servedBy(resp.Result)), true)
	}
}

func (c *call) timedOut(timeout time.Duration) {
	if c.bcall == nil || !c.conn.Abandon(c.bcall, "timed out in mcpgate") {
		return
	}
	if c.end() {
		c.stream.push(errorResponse(c.clientID, CodeTimeout, "backend %q did not answer %s within %s (timeout; see the backend's timeout setting)",
			c.b.Name(), c.bcall.Method, timeout), true)
	}
	c.b.Probe(c.conn)
}

// cancel gives up on the call for the client: the backend is told, a late
// response is dropped, and the client's stream ends without an answer.
func (c *call) cancel(reason string) {
	if c.giveUp(reason) && c.end() {
		c.stream.drop()
	}
}

// giveUp abandons the backend's request. It reports false if the backend
// answered meanwhile. A request still being sent is abandoned by forwardTo
// as soon as it is.
func (c *call) giveUp(reason string) bool {
	c.sess.mu.Lock()
	bcall := c.bcall
	if bcall == nil {
		c.unsent = reason
	}
	c.sess.mu.Unlock()
	return bcall == nil || c.conn.Abandon(bcall, reason)
}

// abort gives up on the call like cancel, but answers the client with an
// error of code saying why.
func (c *call) abort(code int, why string) {
	if !c.giveUp(why) {
		return // answered meanwhile
	}
	if c.end() {
		c.stream.push(errorResponse(c.clientID, code, "%s", why), true)
	}
}

// end does the bookkeeping of a finished call once. It reports whether this
// was the first end, i.e. whether the caller should answer the client.
func (c *call) end() bool {
	if c.ended.Swap(true) {
		return false
	}
	c.once.Do(func() {
		if c.then != nil {
			defer c.then(c.succeeded.Load())
		}
		s := c.sess
		s.mu.Lock()
		if s.calls[string(c.clientID)] == c {
			delete(s.calls, string(c.clientID))
		}
		if c.timer != nil {
			c.timer.Stop()
		}
		s.mu.Unlock()
		c.forget()
		s.g.callEnded()
	})
	return true
}

// forget drops the call's progress token.
func (c *call) forget() {
	if c.token != 0 {
		c.sess.g.progress.Delete(c.token)
	}
}
