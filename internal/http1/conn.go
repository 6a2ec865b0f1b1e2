package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one client connection, served by one goroutine that reads a
// request, runs the handler and writes the response, in turn. A second
// goroutine, the watch, reads from it only while a handler that has read
// its whole request body runs for longer than WatchAfter.
type conn struct {
	srv        *Server
	rwc        net.Conn
	remoteAddr string
	ctx        context.Context // of the connection's requests
	cr         connReader
	br         *bufio.Reader
	bw         *bufio.Writer
	resp       response
	body       body
	plainBody  plainBody // the source of body for a plain request
	watchTimer *time.Timer

	mu       sync.Mutex
	cond     sync.Cond     // signalled when the watch ends
	idle     bool          // waiting for a request: Shutdown may close it
	handling bool          // a handler runs: the watch may start
	served   bool          // a request was read: a Handover may close it when idle
	req      *http.Request // the request a handler runs for, for Handover
	watching bool          // the watch's read is in flight
	aborting bool          // the watch is being stopped: its timeout is expected
	gone     bool          // the watch saw the client go away
	cancel   context.CancelFunc

	deadline   bool // a read deadline may be set on rwc
	closeAfter bool // the connection closes after this response
}

// aLongTimeAgo is a deadline that unblocks a read at once.
var aLongTimeAgo = time.Unix(1, 0)

func (s *Server) newConn(rwc net.Conn) *conn {
	c := &conn{srv: s, rwc: rwc, ctx: context.Background()}
	if a := rwc.RemoteAddr(); a != nil {
		c.remoteAddr = a.String()
	}
	c.ctx = context.WithValue(c.ctx, http.LocalAddrContextKey, rwc.LocalAddr())
	if s.ConnContext != nil {
		c.ctx = s.ConnContext(c.ctx, rwc)
	}
	c.cond.L = &c.mu
	c.cr.c = c
	c.cr.remain = math.MaxInt64
	c.br = bufio.NewReaderSize(&c.cr, 4<<10)
	c.bw = bufio.NewWriterSize(rwc, 4<<10)
	c.resp.c = c
	c.resp.header = http.Header{}
	c.body.c = c
	c.watchTimer = time.AfterFunc(time.Hour, c.watch)
	c.watchTimer.Stop()
	return c
}

func (c *conn) serve() {
	defer func() {
		c.watchTimer.Stop()
		c.rwc.Close()
		c.srv.trackConn(c, false)
	}()
	for c.serveOne() {
	}
}

// serveOne reads and answers one request and reports whether the
// connection stays open for the next.
func (c *conn) serveOne() bool {
	s := c.srv
	if !c.setIdle(true) {
		return false
	}
	// The bound of the header counts from the request's first byte.
	c.cr.remain = s.maxHeaderBytes() + 4096 // net/http's slack
	if d := s.idleTimeout(); d > 0 {
		c.rwc.SetReadDeadline(time.Now().Add(d))
		c.deadline = true
	} else if c.deadline {
		c.rwc.SetReadDeadline(time.Time{})
		c.deadline = false
	}
	if _, err := c.br.Peek(1); err != nil {
		return false
	}
	if !c.setIdle(false) {
		return false
	}
	if s.ReadTimeout > 0 {
		c.rwc.SetReadDeadline(time.Now().Add(s.ReadTimeout))
		c.deadline = true
	}
	req, checked := c.readRequest()
	if req == nil || c.refuse(req, checked) {
		return false
	}
	req.RemoteAddr = c.remoteAddr
	ctx, cancel := context.WithCancel(c.ctx)
	// In place: WithContext is inlined here, so its copy of the request
	// stays on the stack instead of being a second request on the heap.
	*req = *req.WithContext(ctx)
	c.closeAfter = req.Close || s.inShut.Load() // req.Close: HTTP/1.0 without keep-alive too
	c.body.reset(req)
	c.resp.reset(req)

	c.mu.Lock()
	c.handling, c.cancel, c.served, c.req = true, cancel, true, req
	c.mu.Unlock()
	s.changed()
	c.watchTimer.Reset(s.watchAfter())
	c.runHandler(req)
	c.stopWatch()
	cancel()

	c.resp.finish()
	if c.bw.Flush() != nil || c.resp.failed || c.gone {
		return false
	}
	if !c.body.eof.Load() {
		// The rest of the body is still coming, unless the client waits
		// to be told to continue: let it read the answer before the close
		// destroys it.
		if !c.body.toContinue {
			c.closeWriteAndWait()
		}
		return false
	}
	return !c.closeAfter && !c.resp.closing
}

// readRequest reads the next request's head: a plain one itself (see
// readPlain), any other with net/http's parser. It answers a request it
// cannot read and returns nil; it reports whether the request's field
// names are known to be tokens.
func (c *conn) readRequest() (*http.Request, bool) {
	if req := readPlain(c.br, &c.plainBody); req != nil {
		c.cr.remain = math.MaxInt64
		return req, true
	}
	// The head is kept as read: for an HTTP/1.0 request, net/http drops
	// Transfer-Encoding before anyone sees it.
	buffered, _ := c.br.Peek(c.br.Buffered())
	head := append([]byte(nil), buffered...)
	c.cr.record = &head
	req, err := http.ReadRequest(c.br)
	c.cr.record = nil
	hitLimit := c.cr.remain <= 0
	c.cr.remain = math.MaxInt64
	read := head[:max(len(head)-c.br.Buffered(), 0)]
	if err == nil && !req.ProtoAtLeast(1, 1) && hasField(read, "transfer-encoding") {
		// RFC 9112 section 6.1: such a message's framing is faulty. Its
		// body's bytes would be read as the next request; behind a proxy
		// that is a desync.
		req.Body.Close()
		badRequest(c.rwc, http.StatusBadRequest, "an HTTP/1.0 request with Transfer-Encoding has faulty framing (RFC 9112 section 6.1)")
		c.closeWriteAndWait()
		return nil, false
	}
	if err == nil && hasField(read, "transfer-encoding") && hasField(read, "content-length") {
		// RFC 9112 section 6.3: the chunked framing wins, and the
		// connection closes after the answer, for a peer that framed the
		// message by its Content-Length instead.
		req.Close = true
	}
	if err != nil {
		switch {
		case hitLimit:
			badRequest(c.rwc, http.StatusRequestHeaderFieldsTooLarge, "")
			c.closeWriteAndWait()
		case isCommonNetReadError(err):
		case strings.Contains(err.Error(), "unsupported transfer encoding"):
			badRequest(c.rwc, http.StatusNotImplemented, err.Error())
		default:
			badRequest(c.rwc, http.StatusBadRequest, err.Error())
		}
		return nil, false
	}
	return req, false
}

func (c *conn) runHandler(req *http.Request) {
	defer c.recoverHandler()
	c.srv.Handler.ServeHTTP(&c.resp, req)
}

// recoverHandler turns a handler's panic into a log line and a closed
// connection, as net/http does; http.ErrAbortHandler closes quietly.
func (c *conn) recoverHandler() {
	if p := recover(); p != nil {
		c.closeAfter = true
		c.resp.failed = true
		if p != http.ErrAbortHandler {
			c.srv.logf("http1: panic serving %s: %v\n%s", c.remoteAddr, p, debug.Stack())
		}
	}
}

// refuse answers a request that is well-formed but not one to serve, as
// net/http's server would, and reports whether it did. namesChecked
// skips the check of the field names.
func (c *conn) refuse(req *http.Request, namesChecked bool) bool {
	status, why := 0, ""
	switch {
	case req.ProtoMajor != 1:
		status, why = http.StatusHTTPVersionNotSupported, "this server speaks HTTP/1.1"
	case req.ProtoAtLeast(1, 1) && req.Host == "" && req.Method != http.MethodConnect:
		status, why = http.StatusBadRequest, "missing required Host header"
	case !validHost(req.Host):
		status, why = http.StatusBadRequest, "malformed Host header"
	case !namesChecked && !validFields(req.Header):
		status, why = http.StatusBadRequest, "invalid header name"
	case req.Header.Get("Expect") != "" && !expectsContinue(req):
		status, why = http.StatusExpectationFailed, "only Expect: 100-continue is understood"
	}
	if status != 0 {
		badRequest(c.rwc, status, why)
	}
	return status != 0
}

func expectsContinue(req *http.Request) bool {
	return strings.EqualFold(req.Header.Get("Expect"), "100-continue")
}

// setIdle marks the connection waiting for a request, which Shutdown
// may close, or no longer waiting; it reports false once the server is
// shutting down.
func (c *conn) setIdle(idle bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = idle
	// During a Handover a connection accepted before the listener closed
	// is served its first request, not dropped.
	return !c.srv.inShut.Load() || (c.srv.handingOver.Load() && !c.served)
}

func (c *conn) closeIfIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle && (c.served || !c.srv.handingOver.Load()) {
		c.rwc.Close()
	}
}

// close ends the connection at once and cancels its request.
func (c *conn) close() {
	c.rwc.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
}

// closeWriteAndWait closes the sending side and waits a little before the
// connection closes, so that a client still sending reads the response
// before an RST would destroy it, as net/http's server does. Only sockets
// (TCP and unix) reset a connection closed with unread data, and only they
// can close one side: anything else closes at once.
func (c *conn) closeWriteAndWait() {
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		time.Sleep(500 * time.Millisecond)
	}
}

// watch runs in its own goroutine, WatchAfter into a handler: it reads
// from the connection, which is idle until the handler answered, so that
// a client going away cancels the request's context at once rather than
// when its answer fails to be written. A byte it reads belongs to the next
// request and is kept for it.
func (c *conn) watch() {
	c.mu.Lock()
	if !c.handling || c.watching || c.cr.hasByte {
		c.mu.Unlock()
		return
	}
	if !c.body.eof.Load() {
		// The handler may still read the body: look again later.
		c.watchTimer.Reset(c.srv.watchAfter())
		c.mu.Unlock()
		return
	}
	c.watching = true
	c.mu.Unlock()
	c.rwc.SetReadDeadline(time.Time{})
	n, err := c.rwc.Read(c.cr.byteBuf[:])
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = true // whatever it is now, the next request sets its own
	if n == 1 {
		c.cr.hasByte = true
	}
	var ne net.Error
	if err != nil && !(c.aborting && errors.As(err, &ne) && ne.Timeout()) {
		c.gone = true
		if c.cancel != nil {
			c.cancel()
		}
	}
	c.watching = false
	c.cond.Broadcast()
}

// stopWatch ends the handler's time: a watch that has not started never
// will, one that is reading is woken and waited for.
func (c *conn) stopWatch() {
	c.watchTimer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handling, c.cancel, c.req = false, nil, nil
	if c.watching {
		c.aborting = true
		c.rwc.SetReadDeadline(aLongTimeAgo)
		c.deadline = true
		for c.watching {
			c.cond.Wait()
		}
		c.aborting = false
	}
}

// connReader is what the connection's bufio.Reader reads from: the
// connection, after the byte the watch may have read, and at most remain
// bytes (the bound of a request's header).
type connReader struct {
	c       *conn
	remain  int64
	hasByte bool
	byteBuf [1]byte
	// record, when set, gets a copy of what is read: the head of a
	// request net/http parses.
	record *[]byte
}

func (cr *connReader) Read(p []byte) (int, error) {
	if cr.remain <= 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > cr.remain {
		p = p[:cr.remain]
	}
	if cr.hasByte {
		// The watch has ended (stopWatch waited for it): no lock needed.
		p[0] = cr.byteBuf[0]
		cr.hasByte = false
		cr.remain--
		return 1, nil
	}
	n, err := cr.c.rwc.Read(p)
	cr.remain -= int64(n)
	if cr.record != nil {
		*cr.record = append(*cr.record, p[:n]...)
	}
	return n, err
}

// hasField reports whether the request head holds a field line named
// lower, in any case.
func hasField(head []byte, lower string) bool {
	for line := range bytes.Lines(head) {
		if n, _, ok := bytes.Cut(line, []byte(":")); ok && equalFold(string(bytes.TrimRight(n, " \t")), lower) {
			return true
		}
	}
	return false
}

// body is a request's body as the handler sees it: it answers Expect:
// 100-continue on the first read, notes the end (the watch waits for
// it), and does not drain the rest on Close, which the connection does
// within a bound.
type body struct {
	c          *conn
	src        io.ReadCloser
	eof        atomic.Bool
	toContinue bool
}

// maxDrain is how much of a body the handler left unread is read and
// dropped to keep the connection; a larger rest closes it.
const maxDrain = 256 << 10

func (b *body) reset(req *http.Request) {
	b.src = req.Body
	b.toContinue = false
	if req.Body == nil || req.Body == http.NoBody {
		b.eof.Store(true)
		return
	}
	b.eof.Store(false)
	b.toContinue = expectsContinue(req) && req.ProtoAtLeast(1, 1)
	req.Body = b
}

func (b *body) Read(p []byte) (int, error) {
	if b.eof.Load() {
		return 0, io.EOF
	}
	if b.toContinue {
		b.toContinue = false
		if !b.c.resp.sent && b.c.resp.status == 0 {
			b.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if err := b.c.bw.Flush(); err != nil {
				return 0, err
			}
		}
	}
	n, err := b.src.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// Close leaves what is left of the body to the connection, which reads
// past it, within maxDrain, before the response.
func (b *body) Close() error { return nil }

// drain reads what the handler left of the body, up to maxDrain, and
// reports whether it is all read. A client that was never told to
// continue sends no body: that is not waited for.
func (b *body) drain() bool {
	if b.eof.Load() {
		return true
	}
	if b.toContinue {
		return false
	}
	if _, err := io.CopyN(io.Discard, b.src, maxDrain+1); err == io.EOF { // before maxDrain+1 bytes
		b.eof.Store(true)
		return true
	}
	return false
}

func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}

// validHost reports whether h has only bytes a Host header may have, as
// net/http's server checks.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validFields reports whether every field name is a token, as net/http's
// server checks; textproto has already refused control bytes in values.
func validFields(h http.Header) bool {
	for k := range h {
		if k == "" {
			return false
		}
		for i := 0; i < len(k); i++ {
			if nameByte[k[i]] == 0 {
				return false
			}
		}
	}
	return true
}
