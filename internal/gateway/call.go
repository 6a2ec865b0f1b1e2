package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// call is a client's request forwarded to a backend.
type call struct {
	sess     *Session
	clientID json.RawMessage
	stream   *Stream
	b        *backend.Backend
	conn     *backend.Conn
	bcall    *backend.Call

	started  time.Time
	progress atomic.Int64 // when the backend last reported progress, unix ns

	tool        string          // for tools/call, the tool's name at the backend
	token       string          // our progress token toward the backend, as JSON; "" if none
	clientToken json.RawMessage // the client's progress token
	unsent      string          // why the call was given up before bcall was set; guarded by sess.mu

	// adm is the call's admission, ended with the call; then, if set,
	// learns whether the backend accepted the request, and the size of its
	// answer, once the call ends. Both run in finish.
	adm       *backend.Admission
	then      func(ok bool, size int)
	succeeded atomic.Bool
	size      atomic.Int64 // bytes of the backend's result or error

	// modern is set when the request went to the backend in the
	// 2026-07-28 era: only then can its result be an InputRequiredResult.
	modern    bool
	fb        *fallback   // where the call may go when the backend dies before answering
	answering atomic.Bool // the backend sent something for the call: no fallback any more

	// asking counts the backend's requests for the call that wait for
	// the client's answer, and askedAt is when the last one came, in unix
	// ns (see attributeRequest).
	asking  atomic.Int32
	askedAt atomic.Int64

	ended atomic.Bool
	once  sync.Once   // guards the bookkeeping in end
	send  sendContext // bounds the sending of the request (sendAdmitted)
	// op is the client op of the message the call sent last (an input
	// round sends another), nil without telemetry (see telemetry.go).
	op atomic.Pointer[telemetry.Op]

	// For a modern backend's call of a 2025 session, which answers the
	// backend's input_required results (see askClient): the request's
	// method and params as first sent, and the rounds so far.
	method string
	params json.RawMessage
	rounds int

	// For a resources/read of a URI the backend knows by another (an
	// App's view, see apps.go): the backend's and the client's.
	readURI, exposedURI string

	// MCP Tasks (tasks*.go): creates is set for a tools/call, whose
	// answer may create a task; task is the task a tasks/* request is
	// about, and until, if set, the deadline that replaces the idle
	// timeout (tasks/result waits for the task).
	creates bool
	task    *task
	until   time.Time
}

// viewURIs records, for a resources/read whose client's params name
// another uri than the backend's, both: the result's contents get the
// client's back.
func (c *call) viewURIs(client, backend json.RawMessage) {
	exposed, _, _ := stringParam(client, "uri")
	original, _, _ := stringParam(backend, "uri")
	if exposed != original {
		c.readURI, c.exposedURI = original, exposed
	}
}

// deliver receives the backend's answer, on the backend's reader goroutine.
func (c *call) deliver(resp *jsonrpc.Message, err error) {
	if err == nil && resp.Error == nil && c.translatesInput() && isInputRequired(resp.Result) {
		// Not answered yet: nothing is pending at the backend while the
		// client is asked, so a cancellation ends the call at once.
		c.sess.mu.Lock()
		c.bcall = nil
		c.sess.mu.Unlock()
		c.op.Load().EndResult(resp.ID, resp.Result, nil) // this message is answered; the retry is one of its own
		if !c.ended.Load() {
			c.askClient(resp.Result)
		}
		return
	}
	if op := c.op.Load(); op != nil {
		endOp(op, resp, err)
	}
	c.succeeded.Store(err == nil && resp.Error == nil)
	if err == nil {
		c.size.Store(int64(len(resp.Result) + len(resp.Error)))
	}
	created, refused := c.createdTask(resp, err) // before end: the task takes the call's admission
	if !c.end() {
		c.sess.g.tasks.abandon(created)
		return
	}
	defer c.sess.g.callEnded() // after the answer is pushed: Drain waits for it
	c.taskAnswered(resp, err)
	switch {
	case errors.Is(err, backend.ErrTooLarge):
		c.stream.push(errorResponse(c.clientID, CodeMessageTooLarge, "%v", err), true)
	case err != nil:
		if !c.answering.Load() && c.fb.try(c.sess, c.b, err) {
			return
		}
		c.stream.push(errorResponse(c.clientID, CodeBackendUnavailable, "%v", err), true)
	case resp.Error != nil:
		if c.sess.stateless && c.sess.g.urlRequired(c, resp.Error) {
			return // asked for as input requests
		}
		if !c.sess.stateless {
			c.sess.rememberRequiredURLs(c.b.Name(), resp.Error)
		}
		c.stream.push(jsonrpc.AppendRawError(nil, c.clientID, resp.Error), true)
	case refused != nil:
		c.stream.push(jsonrpc.AppendError(nil, c.clientID, refused), true)
	default:
		result := resp.Result
		if c.modern && !c.sess.stateless {
			result = legacyResult(result) // a 2025 session's (see legacy.go)
		}
		switch {
		case created != nil:
			result = created.exposedCreate(result) // a task is no output
		case c.task != nil:
			result = c.task.exposedResult(result)
			if c.tool != "" { // the result of a tasks/result
				result = c.sess.g.processOutput(c.b.Name(), c.tool, result)
			}
		case c.tool != "" && !(c.modern && isInputRequired(result)): // a question to the client is no output
			result = c.sess.g.processOutput(c.b.Name(), c.tool, result)
		}
		result = c.servedBy(result)
		if c.readURI != "" {
			result = exposedContents(result, c.readURI, c.exposedURI)
		}
		if c.sess.stateless && c.stream.pushModern(resp, result, c.clientID) {
			return // decorated in place, as the id was replaced
		}
		if out, ok := jsonrpc.SpliceResult(resp, result, c.clientID); ok {
			c.stream.push(out, true) // the backend's bytes under the client's id: no copy
			return
		}
		c.stream.push(jsonrpc.AppendResult(nil, c.clientID, result), true)
	}
}

// endOp ends a call's client op with the backend's answer, or with the
// error that ended the call without one.
func endOp(op *telemetry.Op, resp *jsonrpc.Message, err error) {
	switch {
	case errors.Is(err, backend.ErrTooLarge):
		op.Fail(telemetry.ErrTooLarge, CodeMessageTooLarge, err.Error())
	case err != nil:
		op.Fail(telemetry.ErrUnavailable, CodeBackendUnavailable, err.Error())
	default:
		op.EndResult(resp.ID, resp.Result, resp.Error)
	}
}

// progressed records a progress notification: it restarts the idle timeout.
func (c *call) progressed() { c.progress.Store(time.Now().UnixNano()) }

// deadlines are the call's two timeouts: timeout, without an answer or
// progress, and the hard cap maxDuration (0: none).
func (c *call) deadlines() (idle, hard time.Time) {
	cfg := c.b.Config()
	idle = c.started
	if p := c.progress.Load(); p != 0 {
		idle = time.Unix(0, p)
	}
	idle = idle.Add(cfg.Timeout)
	if !c.until.IsZero() {
		idle = c.until
	}
	if cfg.MaxCallDuration > 0 {
		hard = c.started.Add(cfg.MaxCallDuration)
	}
	return idle, hard
}

// armTimer makes the session's deadline timer fire by the call's nearest
// deadline. It runs under sess.mu, once the call is sent (c.bcall set).
func (c *call) armTimer() {
	c.sess.armDeadline(nearest(c.deadlines()))
}

// nearest is the sooner of a call's deadlines.
func nearest(idle, hard time.Time) time.Time {
	if !hard.IsZero() && hard.Before(idle) {
		return hard
	}
	return idle
}

// expired reports why the call's deadline passed at now, and whether the
// backend is then suspect: not when it outlived max_call_duration. why is
// "" while no deadline passed; then next is its nearest one.
func (c *call) expired(now time.Time) (why string, probe bool, next time.Time) {
	cfg := c.b.Config()
	idle, hard := c.deadlines()
	switch {
	case !hard.IsZero() && !now.Before(hard):
		return fmt.Sprintf("within %s (max_call_duration)", cfg.MaxCallDuration), false, time.Time{}
	case !now.Before(idle):
		return fmt.Sprintf("within %s (timeout, counted from its last progress notification; see the backend's timeout setting)", cfg.Timeout), true, time.Time{}
	}
	return "", false, nearest(idle, hard)
}

// timedOut gives up on the call. A call that went silent makes the backend
// suspect, and it is probed; one that outlived max_call_duration does not.
func (c *call) timedOut(within string, probe bool) {
	if c.bcall == nil || !c.conn.Abandon(c.bcall, "timed out in mcpgate") {
		return
	}
	c.op.Load().Fail(telemetry.ErrTimeout, CodeTimeout, "no answer "+within)
	if c.end() {
		c.stream.push(errorResponse(c.clientID, CodeTimeout, "backend %q did not answer %s %s", c.b.Name(), c.bcall.Method, within), true)
		c.sess.g.callEnded()
	}
	if probe {
		c.b.Probe(c.conn)
	}
}

// cancel gives up on the call for the client: the backend is told, a late
// response is dropped, and the client's stream ends without an answer.
func (c *call) cancel(reason string) {
	if !c.giveUp(reason) {
		return // answered meanwhile
	}
	c.op.Load().Fail(telemetry.ErrCancelled, 0, reason)
	if c.end() {
		c.stream.drop()
		c.sess.g.callEnded()
	}
}

// abandoned cancels the call of a stream its client abandoned.
func (c *call) abandoned() {
	c.cancel("the client disconnected")
	c.sess.StreamDone(c.stream)
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
	c.op.Load().Fail(telemetry.ErrCancelled, code, why)
	if c.end() {
		c.stream.push(errorResponse(c.clientID, code, "%s", why), true)
		c.sess.g.callEnded()
	}
}

// end does the bookkeeping of a finished call once. It reports whether this
// was the first end, i.e. whether the caller should answer the client; that
// caller then calls g.callEnded once the answer is pushed, so that Drain
// never returns between the two and a closing session loses no answer.
func (c *call) end() bool {
	if c.ended.Swap(true) {
		return false
	}
	c.once.Do(func() {
		defer c.finish(c.succeeded.Load(), int(c.size.Load()))
		s := c.sess
		s.mu.Lock()
		if s.calls[string(c.clientID)] == c {
			delete(s.calls, string(c.clientID))
		}
		s.mu.Unlock()
		c.forget()
	})
	return true
}

// finish ends the call's admission and tells then how it went.
func (c *call) finish(ok bool, size int) {
	if c.adm != nil {
		outcome := "error"
		if ok {
			outcome = "ok"
		}
		c.adm.Done(outcome)
	}
	if c.then != nil {
		c.then(ok, size)
	}
}

// forget drops the call's progress token.
func (c *call) forget() {
	if c.token != "" {
		c.sess.g.progress.Delete(c.token)
	}
}
