package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// ProtocolVersion is the MCP version the gateway asks its legacy backends
// for in initialize (see ModernProtocolVersion for the others).
const ProtocolVersion = "2025-11-25"

// Errors a call can end with.
var (
	// ErrGone is returned for calls on a child that has exited or is stopping.
	ErrGone = errors.New("backend process is gone")
	// ErrTooLarge is returned for a call whose response exceeded the limit.
	ErrTooLarge = errors.New("message too large")
)

// Conn is the MCP client session with one running child. It multiplexes any
// number of concurrent requests over the child's stdin and stdout: every
// request gets an id unique on this connection, and the pending map routes
// each response back to whoever sent the request.
type Conn struct {
	b      *Backend
	proc   child   // the child; nil for a remote server
	remote *remote // the session with a remote server; nil for a child
	log    *slog.Logger

	in         *stdin        // the child's input; nil for a remote server
	closeStdin chan struct{} // closed to make the writer flush and close stdin
	closeOnce  sync.Once

	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[int64]*Call
	gone    error // set once the child is gone; no new calls are accepted

	exited chan struct{} // closed when the group leader has been reaped
	done   chan struct{} // closed when all pipes are drained and all calls answered
	exit   ExitInfo      // valid once exited is closed

	reason atomic.Pointer[string]     // why we ended the child, for the calls it fails
	server atomic.Pointer[ServerInfo] // set by the handshake
	lists  *refresher
	reads  atomic.Uint64 // lines read from the child, a sign of life

	lastActive atomic.Int64 // unix nanoseconds of the last call sent or answered, for idle_stop

	modern   atomic.Bool  // the server speaks 2026-07-28 (see probe)
	dual     atomic.Bool  // a remote server initialized that speaks 2026-07-28 per request too (see EraDual)
	listenID atomic.Int64 // our subscriptions/listen request, 0 if none

	burst  burst    // see AfterBurst
	listen listener // its filter and request

	metaCache atomic.Pointer[modernMeta] // see meta

	// unread is what the previous mcpgated read from the child and did not
	// handle: read before the pipe (see adopt).
	unread []byte
	// The readers of stdout and stderr: closed when each returned.
	readerDone, stderrDone chan struct{}
	// detaching is set before the readers are stopped for a handover;
	// readLoop then leaves what it read and did not handle in handedOn.
	detaching atomic.Bool
	handedOn  []byte
}

// Call is one request in flight on a child.
type Call struct {
	ID     int64  // the id used toward the child
	Method string // the request's method
	// Owner is the caller's handle on the request, e.g. the client session
	// that caused it; the gateway uses it to attribute requests that the
	// child sends back while the call is in flight.
	Owner   any
	deliver func(*jsonrpc.Message, error)
	modern  bool // sent in the 2026-07-28 era (see GoModern)
}

// Handler receives messages a child sends on its own initiative. Both methods
// are called from the connection's reader goroutine, in the order the child
// wrote the messages, and must not block. A remote server's messages come
// on several HTTP streams at once (the answer to each call, its GET
// stream): those of one stream in order, different streams concurrently.
type Handler interface {
	// Notification is called for every notification except the list_changed
	// ones, which the backend answers itself by refreshing its lists.
	Notification(b *Backend, c *Conn, msg *jsonrpc.Message)
	// Request is called for requests the child sends to its client (sampling,
	// elicitation, roots, ping). The handler must answer each one eventually
	// with c.Reply or c.ReplyError.
	Request(b *Backend, c *Conn, msg *jsonrpc.Message)
	// Exited is called once the child has exited and all it wrote was
	// handled, before its calls in flight are failed: requests it sent that
	// are still waiting for an answer will get none.
	Exited(b *Backend, c *Conn)
}

func newConn(b *Backend, proc child) *Conn {
	c := &Conn{
		b:          b,
		proc:       proc,
		log:        b.log.With("backend_pid", proc.id()),
		in:         newStdin(proc.streams().stdin),
		closeStdin: make(chan struct{}),
		pending:    make(map[int64]*Call),
		exited:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	c.lists = newRefresher(c)
	return c
}

// newRemoteConn returns the connection of a remote backend: the same
// multiplexing as a child's, over HTTP.
func newRemoteConn(b *Backend, r *remote) *Conn {
	c := &Conn{
		b:       b,
		remote:  r,
		log:     b.log.With("backend_url", r.url),
		pending: make(map[int64]*Call),
		exited:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	c.lists = newRefresher(c)
	return c
}

// PID returns the child's process id, which is also its process group id,
// or 0 for a remote server.
func (c *Conn) PID() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.id()
}

// URL returns a remote server's URL as it may be shown (see DisplayURL),
// or "" for a child.
func (c *Conn) URL() string {
	if c.remote == nil {
		return ""
	}
	return c.remote.url
}

// Backend returns the backend this connection belongs to.
func (c *Conn) Backend() *Backend { return c.b }

// Server returns what the child said about itself in its initialize result,
// or nil before the handshake finished.
func (c *Conn) Server() *ServerInfo { return c.server.Load() }

// Done is closed once the child has exited and every call on it is answered.
func (c *Conn) Done() <-chan struct{} { return c.done }

// ended reports whether the child has exited, even if what it wrote last
// is still being read: no new call can reach it.
func (c *Conn) ended() bool {
	select {
	case <-c.exited:
		return true
	case <-c.done:
		return true
	default:
		return false
	}
}

// start runs the goroutines that own the child's pipes and its reaping.
func (c *Conn) start() {
	if c.remote != nil {
		c.remote.start(c)
		return
	}
	readerDone := make(chan struct{})
	stderrDone := make(chan struct{})
	c.readerDone, c.stderrDone = readerDone, stderrDone
	go c.in.run(c)
	go func() {
		defer close(readerDone)
		c.readLoop()
	}()
	go func() {
		defer close(stderrDone)
		readStderr(c.proc.streams().stderr, c.proc.id(), c.b.stderr, c.b.opts.Stderr)
	}()
	go func() {
		c.exit = c.proc.wait()
		close(c.exited)
		c.in.stopWaiting()
		// Every process of the group is dead now, so the pipes reach EOF as
		// soon as we have read what the child wrote last. Only a member that
		// left the group (setsid) could hold them open; don't wait for it.
		for _, ch := range []chan struct{}{readerDone, stderrDone} {
			select {
			case <-ch:
			case <-time.After(2 * time.Second):
			}
		}
		c.proc.streams().stdout.Close()
		c.proc.streams().stderr.Close()
		why := c.exit.Text
		if r := c.reason.Load(); r != nil {
			why = *r
		}
		c.b.opts.Handler.Exited(c.b, c)
		c.fail(fmt.Errorf("backend %q: %w: %s", c.b.name, ErrGone, why))
		close(c.done)
	}()
}

func (c *Conn) readLoop() {
	var pr *prefixed
	var r io.Reader = c.proc.streams().stdout
	if len(c.unread) > 0 {
		pr = &prefixed{rest: c.unread, r: r}
		c.unread, r = nil, pr
	}
	lr := jsonrpc.NewLineReader(r, c.b.opts.MaxMessageBytes)
	defer c.endBurst()
	defer func() {
		if c.detaching.Load() {
			c.handedOn = lr.Unread()
			if pr != nil {
				c.handedOn = append(c.handedOn, pr.rest...)
			}
		}
	}()
	for {
		if c.burstPending() && !lr.LineBuffered() {
			c.endBurst() // what the child wrote together is handled
		}
		buf, err := lr.NextRoom(jsonrpc.SpliceRoom)
		if err == nil || errors.As(err, new(*jsonrpc.ErrLineTooLong)) {
			c.reads.Add(1)
		}
		if err != nil {
			var tooLong *jsonrpc.ErrLineTooLong
			if errors.As(err, &tooLong) {
				c.warnServer("too-large", fmt.Sprintf("backend %q: dropped a message from the child: %v", c.b.name, err), "err", err, "start", truncate(tooLong.Head, 100))
				c.tooLarge(tooLong)
				continue
			}
			return
		}
		msg, err := jsonrpc.ParseRoom(buf, jsonrpc.SpliceRoom) // room to answer the client in place
		if err != nil {
			c.warnServer("invalid", fmt.Sprintf("backend %q: dropped invalid output of the child: %v", c.b.name, err), "err", err, "line", truncate(buf[jsonrpc.SpliceRoom:], 200))
			continue
		}
		c.dispatch(msg)
	}
}

// prefixed reads rest, then r: what a previous mcpgated read of a child's
// output before the pipe.
type prefixed struct {
	rest []byte
	r    io.Reader
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.rest) > 0 {
		n := copy(b, p.rest)
		p.rest = p.rest[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// stopReading stops the readers of the child's stdout and stderr for a
// handover, and returns what was read from stdout and not handled. A line
// the child is writing meanwhile stays split between that and the pipe.
func (c *Conn) stopReading(timeout time.Duration) ([]byte, error) {
	c.detaching.Store(true)
	s := c.proc.streams()
	past := time.Unix(1, 0)
	s.stdout.SetReadDeadline(past)
	s.stderr.SetReadDeadline(past)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for _, ch := range []chan struct{}{c.readerDone, c.stderrDone} {
		select {
		case <-ch:
		case <-timer.C:
			return nil, fmt.Errorf("its output readers did not stop within %s", timeout)
		}
	}
	return c.handedOn, nil
}

// tooLarge answers what can be answered about a message too large to read:
// a response still settles its call, now rather than at its timeout, and a
// request gets an error response. Ids of requests live in the child's id
// space, so only a response may settle one of ours.
func (c *Conn) tooLarge(e *jsonrpc.ErrLineTooLong) {
	h := jsonrpc.ParseHead(e.Head)
	switch {
	case h.ID == nil:
	case h.Response:
		id, err := strconv.ParseInt(string(h.ID), 10, 64)
		if err != nil {
			return
		}
		if call := c.take(id); call != nil {
			call.deliver(nil, fmt.Errorf("backend %q answered %s with a %w: the limit is %d bytes (max_message_bytes)", c.b.name, call.Method, ErrTooLarge, e.Limit))
		}
	case h.Request:
		c.ReplyError(h.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "request too large: mcpgate reads messages of at most %d bytes (max_message_bytes)", e.Limit))
	}
}

func (c *Conn) dispatch(msg *jsonrpc.Message) {
	switch {
	case msg.IsResponse():
		id, err := strconv.ParseInt(string(msg.ID), 10, 64)
		call := c.take(id)
		if err != nil || call == nil {
			c.log.Warn(fmt.Sprintf("backend %q: dropped a response with an unknown id", c.b.name), "id", string(msg.ID))
			return
		}
		now := time.Now().UnixNano()
		c.touchAt(now)
		c.b.mon.heard.Store(now) // heardFrom
		call.deliver(msg, nil)
	case msg.IsNotification():
		if msg.Method == "notifications/progress" {
			c.b.heardFrom() // a long call's progress proves life as its answer would
		}
		if c.lists.notify(msg.Method) {
			return
		}
		if msg.Method == "notifications/subscriptions/acknowledged" && c.modern.Load() {
			c.acknowledged(msg.Params) // the answer to our subscriptions/listen
			return
		}
		c.b.opts.Handler.Notification(c.b, c, msg)
	default:
		c.b.opts.Handler.Request(c.b, c, msg)
	}
}

func (c *Conn) take(id int64) *Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := c.pending[id]
	delete(c.pending, id)
	return call
}

// fail answers every pending call with err and refuses new ones.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	c.gone = err
	calls := c.pending
	c.pending = map[int64]*Call{}
	c.mu.Unlock()
	for _, call := range calls {
		call.deliver(nil, err)
	}
}

// Go sends a request to the child. deliver is called exactly once, from the
// connection's reader goroutine or when the child exits, with the response
// (which may carry an error object) or with an error; it must not block.
// Go returns an error instead, and never calls deliver, when the request
// could not be sent; a request whose child died while it was being sent is
// answered through deliver like any other. Either way the call ends exactly
// once. Params must not contain line breaks (see jsonrpc.Compact).
func (c *Conn) Go(ctx context.Context, method string, params json.RawMessage, owner any, deliver func(*jsonrpc.Message, error)) (*Call, error) {
	return c.goEra(ctx, c.modern.Load(), method, params, noSpan, owner, deliver)
}

// noSpan is goEra's without for a request sent as it is.
var noSpan = jsonrpc.Span{Start: -1}

// goEra is Go in the era modern says; without is the span in params of
// an object whose 2026-07-28 members are left out as the message is
// written (see GoWithout), or noSpan.
func (c *Conn) goEra(ctx context.Context, modern bool, method string, params json.RawMessage, without jsonrpc.Span, owner any, deliver func(*jsonrpc.Message, error)) (*Call, error) {
	if modern {
		if c.modern.Load() && (method == "resources/subscribe" || method == "resources/unsubscribe") {
			return c.resourceSubscription(method, params, owner, deliver), nil // gone in 2026-07-28
		}
		var err error
		if params, err = c.withMeta(params); err != nil {
			return nil, err
		}
	}
	call := &Call{ID: c.nextID.Add(1), Method: method, Owner: owner, deliver: deliver, modern: modern}
	c.touch()
	c.mu.Lock()
	if c.gone != nil {
		c.mu.Unlock()
		return nil, c.gone
	}
	c.pending[call.ID] = call
	c.mu.Unlock()
	err := c.sendWith(ctx, func(dst []byte) []byte {
		var id [20]byte
		dst = slices.Grow(dst, len(params)+len(method)+64) // one allocation for a large request, if any
		if without.Start >= 0 {
			return jsonrpc.AppendRequestWithout(dst, strconv.AppendInt(id[:0], call.ID, 10), method, params, without, modernRequestMeta[:])
		}
		return jsonrpc.AppendRequest(dst, strconv.AppendInt(id[:0], call.ID, 10), method, params)
	})
	if err != nil {
		if c.take(call.ID) == nil {
			// fail took the call while it was being sent and answers it:
			// it must not end a second time with this error.
			return call, nil
		}
		return nil, err
	}
	return call, nil
}

// ErrTimeout is returned for a call the child did not answer in time.
var ErrTimeout = errors.New("no answer in time")

// Async sends a request the gateway makes on its own and calls done exactly
// once: with the response, with the reason it could not be sent, or with an
// error wrapping ErrTimeout when the child did not answer within timeout;
// the child is then told the request is cancelled. Nothing of the call
// outlives the timeout. done must not block.
//
// Such requests meet the circuit breaker as calls do: while the circuit is
// open they are refused at once (a *RefusedError), and one that times out
// makes the backend suspect, so that it is probed.
func (c *Conn) Async(method string, params json.RawMessage, timeout time.Duration, done func(*jsonrpc.Message, error)) {
	if open, retryAt := c.b.circuitOpen(); open {
		done(nil, c.b.circuitError(retryAt))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	call, err := c.Go(ctx, method, params, nil, func(m *jsonrpc.Message, err error) {
		cancel()
		done(m, err)
	})
	if err != nil {
		cancel()
		done(nil, err)
		return
	}
	// Abandon and deliver both take the call from the pending map, so only
	// one of them ends it.
	context.AfterFunc(ctx, func() {
		if c.Abandon(call, "timed out in mcpgate") {
			done(nil, fmt.Errorf("backend %q did not answer %s within %s: %w", c.b.name, method, timeout, ErrTimeout))
			if c.proc != nil || c.remote != nil {
				c.b.Probe(c)
			}
		}
	})
}

// Call sends a request and waits for its result. An error response comes
// back as a *jsonrpc.Error.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	type reply struct {
		msg *jsonrpc.Message
		err error
	}
	ch := make(chan reply, 1)
	call, err := c.Go(ctx, method, params, nil, func(m *jsonrpc.Message, err error) { ch <- reply{m, err} })
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		if r.msg.Error != nil {
			return nil, jsonrpc.DecodeError(r.msg.Error)
		}
		return r.msg.Result, nil
	case <-ctx.Done():
		if !c.Abandon(call, "timed out") {
			r := <-ch
			if r.err == nil && r.msg.Error == nil {
				return r.msg.Result, nil
			}
		}
		return nil, ctx.Err()
	}
}

// Abandon gives up on a call: it is removed from the pending map, so a late
// response is dropped, and the child is told with notifications/cancelled.
// It reports whether the call was still pending; if not, deliver has been or
// is being called.
func (c *Conn) Abandon(call *Call, reason string) bool {
	if c.take(call.ID) == nil {
		return false
	}
	if call.Method == "initialize" {
		return true // the spec forbids cancelling initialize
	}
	if c.remote == nil || !call.modern { // over 2026-07-28 HTTP, closing its stream cancels it
		params := jsonrpc.AppendString([]byte(`{"requestId":`+strconv.FormatInt(call.ID, 10)+`,"reason":`), reason)
		params = append(params, '}')
		c.trySend(jsonrpc.AppendNotification(nil, "notifications/cancelled", params))
	}
	if c.remote != nil {
		c.remote.abandon(call.ID)
	}
	return true
}

// Calls calls fn for every call in flight, under the connection's lock.
func (c *Conn) Calls(fn func(*Call)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, call := range c.pending {
		fn(call)
	}
}

// Notify sends a notification to the child. A modern server takes only
// notifications/cancelled; others are dropped.
func (c *Conn) Notify(ctx context.Context, method string, params json.RawMessage) error {
	if c.modern.Load() && method != "notifications/cancelled" {
		return nil
	}
	return c.send(ctx, jsonrpc.AppendNotification(nil, method, params))
}

// Reply answers a request the child sent, under the child's own raw id.
func (c *Conn) Reply(id, result json.RawMessage) {
	c.trySend(jsonrpc.AppendResult(nil, id, result))
}

// ReplyRawError answers a request the child sent with a raw error object.
func (c *Conn) ReplyRawError(id, errObj json.RawMessage) {
	c.trySend(jsonrpc.AppendRawError(nil, id, errObj))
}

// ReplyError answers a request the child sent with an error.
func (c *Conn) ReplyError(id json.RawMessage, e *jsonrpc.Error) {
	c.trySend(jsonrpc.AppendError(nil, id, e))
}

func (c *Conn) send(ctx context.Context, msg []byte) error {
	return c.sendWith(ctx, func(dst []byte) []byte { return append(dst, msg...) })
}

// sendWith sends the message build appends to dst, waiting for room in the
// child's queue until ctx ends. A child's message is built in the queue
// itself and written by the caller (see stdin).
func (c *Conn) sendWith(ctx context.Context, build func(dst []byte) []byte) error {
	if c.remote != nil {
		return c.remote.send(ctx, build(nil))
	}
	err := c.in.send(ctx, true, c.exited, build)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("backend %q is not reading its input: %w", c.b.name, ctx.Err())
	}
	return err
}

// trySend queues a message without waiting: answers and cancellations are
// sent from goroutines that must not stall on a child that stopped reading.
func (c *Conn) trySend(msg []byte) {
	if c.remote != nil {
		c.remote.trySend(msg)
		return
	}
	err := c.in.send(context.Background(), false, c.exited, func(dst []byte) []byte { return append(dst, msg...) })
	if errors.Is(err, errQueueFull) {
		c.log.Warn(fmt.Sprintf("backend %q: dropped a message to the child: its input is full", c.b.name), "message", truncate(msg, 200))
	}
}

// shutdown stops the child the graceful way: close its stdin, give it the
// grace period, SIGTERM its process group, give it the grace period again,
// then SIGKILL the group. It returns once the child is reaped and its pipes
// are drained.
func (c *Conn) shutdown(grace time.Duration) {
	if c.remote != nil {
		c.remote.shutdown(grace)
		return
	}
	c.closeOnce.Do(func() { close(c.closeStdin) })
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGKILL} {
		timer := time.NewTimer(grace)
		select {
		case <-c.exited:
			timer.Stop()
			<-c.done
			return
		case <-timer.C:
		}
		if u := c.proc.unitName(); u != "" {
			if sig == unix.SIGTERM { // systemd escalates to SIGKILL itself
				c.log.Info(fmt.Sprintf("backend %q did not exit in time; stopping its unit %s", c.b.name, u), "unit", u, "grace_period", grace)
				c.proc.signal(sig)
			}
			continue
		}
		c.log.Info(fmt.Sprintf("backend %q did not exit in time; sending %s to its process group", c.b.name, unix.SignalName(sig)), "signal", unix.SignalName(sig), "grace_period", grace)
		c.proc.signal(sig)
	}
	<-c.done
}

// kill ends the child at once and waits until it is reaped.
func (c *Conn) kill() {
	if c.remote != nil {
		c.remote.kill()
		return
	}
	c.proc.signal(unix.SIGKILL)
	<-c.done
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
