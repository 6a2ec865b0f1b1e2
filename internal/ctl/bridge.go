package ctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Bridge defaults and limits.
const (
	// bridgeSystemSocket is where mcpgate.socket listens.
	bridgeSystemSocket = "/run/mcpgate/mcpgate.sock"
	// bridgeEndpoint is the gateway's default endpoint path.
	bridgeEndpoint = "/mcp"
	// bridgeMaxMessage bounds one message in either direction. The daemon
	// enforces its own max_message_bytes on what it receives; this only
	// keeps the bridge's memory bounded.
	bridgeMaxMessage = 256 << 20
	// bridgeEOFGrace is how long requests in flight may still be answered
	// after the client closed stdin, before the session is deleted.
	bridgeEOFGrace = 5 * time.Second
	// bridgeRetryMax caps the delay between attempts to re-open the
	// standalone event stream.
	bridgeRetryMax = 30 * time.Second
	// codeUnreachable is the JSON-RPC error code of the answers the bridge
	// makes itself when it cannot reach mcpgate (a server error, like the
	// gateway's "backend unavailable").
	codeUnreachable = -32000
)

// Streamable HTTP header names.
const (
	bridgeHeaderSession  = "Mcp-Session-Id"
	bridgeHeaderProtocol = "Mcp-Protocol-Version"
	bridgeHeaderLastID   = "Last-Event-Id"
)

// runBridge runs "mcpgatectl bridge": a stdio MCP server that relays to
// mcpgate's Streamable HTTP endpoint. It parses --socket, --url, --endpoint
// and --user. It returns 0 when stdin ends or on SIGINT/SIGTERM, 2 for bad
// arguments.
func runBridge(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpgatectl bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mcpgatectl bridge [--user] [--socket PATH [--endpoint PATH] | --url URL] [--token-file FILE]\n\n"+
			"Serves MCP on stdin/stdout for clients that start servers as commands, relaying\n"+
			"every message to the mcpgate daemon.\n\n")
		fs.PrintDefaults()
	}
	socket := fs.String("socket", "", "connect to the daemon's unix `socket` (default "+bridgeSystemSocket+
		", with --user $XDG_RUNTIME_DIR/mcpgate/mcpgate.sock)")
	rawURL := fs.String("url", "", "connect to the daemon's MCP endpoint at `URL` instead, e.g. http://127.0.0.1:7431/mcp")
	endpoint := fs.String("endpoint", bridgeEndpoint, "the MCP endpoint `path` on the socket, as set by endpoint in [gateway]")
	user := fs.Bool("user", false, "talk to the user's mcpgate (systemctl --user) rather than the system's")
	tokenFile := fs.String("token-file", "", "send the bearer token in `FILE` (default: $"+bridgeTokenEnv+", if set)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgatectl bridge: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	opts := bridgeOptions{socket: *socket, url: *rawURL, endpoint: *endpoint, user: *user}
	if set["url"] && (set["socket"] || set["endpoint"]) {
		fmt.Fprintln(stderr, "mcpgatectl bridge: --url cannot be combined with --socket or --endpoint; the URL names both the daemon and the endpoint")
		return 2
	}
	token, err := bridgeToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgatectl bridge: %v\n", err)
		return 2
	}
	b, err := newBridge(opts, stdout, stderr)
	if b != nil {
		b.token = token
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcpgatectl bridge: %v\n", err)
		return 2
	}
	// A client that goes away while we write makes the write fail with
	// EPIPE, which ends the bridge, rather than SIGPIPE killing it before
	// it could end its session.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return b.run(ctx, stdin)
}

// bridgeOptions say where the daemon is.
type bridgeOptions struct {
	socket   string // unix socket path; "" for the default
	url      string // endpoint URL; overrides socket
	endpoint string // endpoint path on the socket
	user     bool   // the user's daemon: other default socket and hint
}

// bridge relays newline-delimited JSON-RPC between a stdio client and
// mcpgate's Streamable HTTP endpoint.
type bridge struct {
	client   *http.Client
	endpoint string // the URL requests go to
	target   string // what is dialled, for messages: socket path or URL
	hint     string // the command that shows why mcpgate is not there
	perm     bool   // target is a unix socket, where EACCES has a known fix
	token    string // bearer token sent with every request; "" for none
	out      *bridgeOut
	log      *slog.Logger

	mu          sync.Mutex
	session     bridgeSession
	initRequest []byte // the client's initialize request, replayed for a new session
	listening   bool   // the standalone stream loop was started
	closing     bool   // shutting down: no new session
	unreachable bool   // the last attempt to connect failed
	// pending are the client's requests in flight, by raw id; true once
	// the client cancelled one, which then gets no response from us when
	// its answer breaks off.
	pending map[string]bool

	renew sync.Mutex // serialises starting a new session

	requests sync.WaitGroup // POSTs of requests in flight
	tasks    sync.WaitGroup // every goroutine but the stdin reader
}

// bridgeSession is the daemon's session the client's messages go to. gen
// counts sessions, so that a stale one is renewed only once.
type bridgeSession struct {
	id       string
	protocol string
	gen      int
}

func newBridge(opts bridgeOptions, stdout, stderr io.Writer) (*bridge, error) {
	b := &bridge{
		out:     &bridgeOut{w: stdout},
		log:     slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "mcpgatectl-bridge"),
		hint:    "systemctl status mcpgate.socket",
		pending: map[string]bool{},
	}
	if opts.user {
		b.hint = "systemctl --user status mcpgate.socket"
	}
	b.out.log = b.log
	if opts.url != "" {
		u, err := url.Parse(opts.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--url %q is not an http:// or https:// URL; write one such as http://127.0.0.1:7431/mcp", opts.url)
		}
		b.endpoint, b.target = opts.url, opts.url
		b.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		return b, nil
	}
	path := opts.socket
	if path == "" {
		path = bridgeSystemSocket
		if opts.user {
			path = bridgeUserSocket()
		}
	}
	if opts.endpoint == "" || opts.endpoint[0] != '/' {
		return nil, fmt.Errorf("--endpoint %q does not start with \"/\"; write a path such as /mcp", opts.endpoint)
	}
	b.target, b.perm = path, true
	// The Host header is "localhost", which the daemon always accepts.
	b.endpoint = "http://localhost" + opts.endpoint
	b.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}}
	return b, nil
}

// bridgeUserSocket is where a user's mcpgate.socket listens:
// ListenStream=%t/mcpgate/mcpgate.sock.
func bridgeUserSocket() string {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = filepath.Join("/run/user", strconv.Itoa(os.Getuid()))
	}
	return filepath.Join(dir, "mcpgate", "mcpgate.sock")
}

// run relays until stdin ends, ctx ends, or stdout fails. It returns the
// exit code.
func (b *bridge) run(ctx context.Context, stdin io.Reader) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.out.fail = cancel // the client is gone
	listenCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	// The reader is not waited for: a read from stdin cannot be
	// interrupted, and the process ends soon after run returns.
	go func() {
		lr := jsonrpc.NewLineReader(stdin, bridgeMaxMessage)
		for {
			line, err := lr.Next()
			var tooLong *jsonrpc.ErrLineTooLong
			switch {
			case errors.As(err, &tooLong):
				b.refuseTooLong(tooLong)
				continue
			case err != nil:
				readErr <- err
				return
			}
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
	}()

	eof := false
	for !eof {
		select {
		case line := <-lines:
			b.handle(ctx, listenCtx, line)
		case err := <-readErr:
			if !errors.Is(err, io.EOF) {
				b.log.Warn("reading stdin failed; ending the session", "err", err)
			}
			eof = true
		case <-ctx.Done():
			eof = true
		}
	}
	if ctx.Err() == nil {
		b.awaitRequests(ctx, bridgeEOFGrace)
	}
	stopListening()
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.endSession()
	cancel()
	b.tasks.Wait()
	return 0
}

// awaitRequests waits up to grace for the requests in flight to be
// answered.
func (b *bridge) awaitRequests(ctx context.Context, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		b.requests.Wait()
		close(done)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		b.log.Info("stdin ended with requests unanswered; cancelling them", "waited", grace)
	case <-ctx.Done():
	}
}

// handle relays one line from the client. Requests are relayed
// concurrently, each waiting for its answer on its own goroutine; handle
// returns once the request was sent, so the daemon sees messages in the
// order the client wrote them. Notifications and responses are relayed
// before handle returns; the daemon accepts them at once.
func (b *bridge) handle(ctx, listenCtx context.Context, line []byte) {
	ids, method, err := bridgeClassify(line)
	if err != nil {
		b.out.write(jsonrpc.AppendError(nil, nil, jsonrpc.AsError(err)))
		return
	}
	if method == "notifications/cancelled" {
		if id, _, ok := jsonrpc.LookupPath(line, "params", "requestId"); ok {
			b.mu.Lock()
			if _, inFlight := b.pending[string(id)]; inFlight {
				b.pending[string(id)] = true
			}
			b.mu.Unlock()
		}
	}
	switch {
	case method == "initialize" && len(ids) == 1:
		b.initialize(ctx, line, ids[0])
	case len(ids) > 0:
		b.mu.Lock()
		for _, id := range ids {
			b.pending[string(id)] = false
		}
		b.mu.Unlock()
		sent := make(chan struct{})
		b.requests.Add(1)
		b.tasks.Add(1)
		go func() {
			defer b.tasks.Done()
			defer b.requests.Done()
			b.exchange(ctx, line, ids, sent)
			b.mu.Lock()
			for _, id := range ids {
				delete(b.pending, string(id))
			}
			b.mu.Unlock()
		}()
		select {
		case <-sent:
		case <-ctx.Done():
		}
	default:
		if b.exchange(ctx, line, nil, nil) && method == "notifications/initialized" {
			b.listen(listenCtx)
		}
	}
}

// bridgeClassify returns the ids of the requests in a line (a message or
// a batch) and, for a single message, its method. A line that is not
// JSON-RPC at all is an error the bridge answers itself.
func bridgeClassify(line []byte) (ids []json.RawMessage, method string, err error) {
	if !jsonrpc.IsBatch(line) {
		msg, err := jsonrpc.Parse(line)
		if err != nil {
			return nil, "", err
		}
		if msg.IsRequest() {
			ids = []json.RawMessage{msg.ID}
		}
		return ids, msg.Method, nil
	}
	items, err := jsonrpc.ParseBatch(line)
	if err != nil {
		return nil, "", err
	}
	// Invalid members are left for the daemon to answer.
	for _, item := range items {
		if msg, err := jsonrpc.Parse(item); err == nil && msg.IsRequest() {
			ids = append(ids, msg.ID)
		}
	}
	return ids, "", nil
}

// initialize starts the session with the client's initialize request. Its
// answer goes to the client; nothing else is read from stdin meanwhile,
// since every other message needs the session.
func (b *bridge) initialize(ctx context.Context, line []byte, id json.RawMessage) {
	b.mu.Lock()
	b.initRequest = line
	old := b.session
	b.mu.Unlock()
	sess, result, missing, err := b.startSession(ctx, line, id, b.out.write)
	if err != nil {
		b.answer(missing, err, "initialize")
		return
	}
	if result == nil {
		return // initialize failed; the client has the daemon's error
	}
	b.mu.Lock()
	sess.gen = b.session.gen + 1
	b.session = sess
	b.mu.Unlock()
	if old.id != "" && old.id != sess.id {
		b.deleteSession(old) // the client started over
	}
}

// startSession POSTs an initialize request without a session, passes every
// message of the answer to deliver, and returns the session it started and
// the initialize result. When the daemon answered with a JSON-RPC error
// instead, the session is empty and err nil. err says why there was no
// answer at all; missing are then the ids to answer with it.
func (b *bridge) startSession(ctx context.Context, body []byte, id json.RawMessage, deliver func([]byte)) (sess bridgeSession, result json.RawMessage, missing []json.RawMessage, err error) {
	ids := []json.RawMessage{id}
	resp, err := b.do(ctx, http.MethodPost, body, bridgeSession{}, "", nil)
	if err != nil {
		return sess, nil, ids, err
	}
	missing, err = b.relay(resp, ids, func(msg []byte) {
		if r, ok := bridgeResultFor(msg, id); ok {
			result = append(json.RawMessage(nil), r...)
		}
		deliver(msg)
	})
	if err != nil || result == nil {
		return sess, nil, missing, err
	}
	sess.id = resp.Header.Get(bridgeHeaderSession)
	if v, _, ok := jsonrpc.Lookup(result, "protocolVersion"); ok {
		sess.protocol, _ = jsonrpc.StringValue(v)
	}
	return sess, result, nil, nil
}

// bridgeResultFor returns the result of msg if it is the successful
// response to the request id.
func bridgeResultFor(msg []byte, id json.RawMessage) (json.RawMessage, bool) {
	m, err := jsonrpc.Parse(msg)
	if err != nil || !m.IsResponse() || !bytes.Equal(m.ID, id) || m.Result == nil {
		return nil, false
	}
	return m.Result, true
}

// exchange POSTs a line from the client to the session and relays the
// answer. ids are the requests in it, each of which gets a response: the
// daemon's, or an error made here that says what went wrong. sent, if not
// nil, is closed once the message was written to the daemon or could not
// be. A session the daemon no longer knows (it restarted, or expired the
// session) is replaced by a new one, and the line is sent again. It
// reports whether the daemon accepted the line.
func (b *bridge) exchange(ctx context.Context, body []byte, ids []json.RawMessage, sent chan struct{}) bool {
	var once sync.Once
	markSent := func() {
		if sent != nil {
			once.Do(func() { close(sent) })
		}
	}
	defer markSent()
	what := bridgeDescribe(body, ids)
	for attempt := 0; ; attempt++ {
		sess := b.currentSession()
		resp, err := b.do(ctx, http.MethodPost, body, sess, "", markSent)
		if err != nil {
			if ctx.Err() == nil {
				b.answer(ids, err, what)
			}
			return false
		}
		if resp.StatusCode == http.StatusNotFound && sess.id != "" && attempt == 0 {
			bridgeDiscard(resp)
			if err := b.renewSession(ctx, sess.gen); err != nil {
				if ctx.Err() == nil {
					b.answer(ids, err, what)
				}
				return false
			}
			continue
		}
		missing, err := b.relay(resp, ids, b.out.write)
		if err != nil && ctx.Err() == nil {
			b.answer(missing, err, what)
		}
		return err == nil
	}
}

// bridgeDescribe names a message for log lines: its method, or the kind
// of message.
func bridgeDescribe(body []byte, ids []json.RawMessage) string {
	if v, _, ok := jsonrpc.Lookup(body, "method"); ok {
		if s, ok := jsonrpc.StringValue(v); ok {
			return s
		}
	}
	if jsonrpc.IsBatch(body) {
		return "a batch"
	}
	if len(ids) == 0 {
		return "a response"
	}
	return "a request"
}

func (b *bridge) currentSession() bridgeSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.session
}

// do sends one HTTP request to the endpoint with the session's headers.
// sent, if not nil, is called once the request was written.
func (b *bridge) do(ctx context.Context, method string, body []byte, sess bridgeSession, lastEventID string, sent func()) (*http.Response, error) {
	if sent != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { sent() },
		})
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.endpoint, rd)
	if err != nil {
		return nil, err
	}
	switch method {
	case http.MethodPost:
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	case http.MethodGet:
		req.Header.Set("Accept", "text/event-stream")
	}
	if sess.id != "" {
		req.Header.Set(bridgeHeaderSession, sess.id)
	}
	if sess.protocol != "" {
		req.Header.Set(bridgeHeaderProtocol, sess.protocol)
	}
	if lastEventID != "" {
		req.Header.Set(bridgeHeaderLastID, lastEventID)
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = &bridgeUnreachable{b.unreachableError(err)}
		b.noteReachable(false, err)
		return nil, err
	}
	b.noteReachable(true, nil)
	return resp, nil
}

// bridgeUnreachable is the error of an exchange with the daemon that
// failed for want of a connection; noteReachable has logged it.
type bridgeUnreachable struct{ err error }

func (e *bridgeUnreachable) Error() string { return e.err.Error() }
func (e *bridgeUnreachable) Unwrap() error { return e.err }

// noteReachable logs when mcpgate becomes unreachable and when it is back,
// once each time rather than on every message.
func (b *bridge) noteReachable(ok bool, err error) {
	b.mu.Lock()
	changed := b.unreachable == ok
	b.unreachable = !ok
	b.mu.Unlock()
	switch {
	case changed && ok:
		b.log.Info("reached mcpgate again", "at", b.target)
	case changed:
		b.log.Warn(err.Error())
	}
}

// unreachableError explains a failed HTTP exchange with the daemon and
// says how to find out why.
func (b *bridge) unreachableError(err error) error {
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	cause := err
	if op != nil && op.Err != nil {
		cause = op.Err
	}
	switch {
	case dial && b.perm && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)):
		return fmt.Errorf("permission denied connecting to mcpgate at %s: only root and members of group mcpgate may use its socket; add yourself with \"sudo usermod -aG mcpgate $USER\" and log in again", b.target)
	case dial:
		return fmt.Errorf("cannot reach mcpgate at %s (%v): is mcpgate running? Check with: %s", b.target, cause, b.hint)
	default:
		return fmt.Errorf("the connection to mcpgate at %s failed (%v): is mcpgate running? Check with: %s", b.target, cause, b.hint)
	}
}

// relay passes every message of the daemon's answer to deliver. It returns
// the ids of the requests the answer carried no response for and, when
// there are any or the daemon refused the message, why.
func (b *bridge) relay(resp *http.Response, ids []json.RawMessage, deliver func([]byte)) ([]json.RawMessage, error) {
	defer resp.Body.Close()
	pending := map[string]json.RawMessage{}
	for _, id := range ids {
		pending[string(id)] = id
	}
	answered := func(msg []byte) {
		deliver(msg)
		if len(pending) > 0 {
			bridgeAnswered(msg, pending)
		}
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var err error
	switch {
	case resp.StatusCode == http.StatusAccepted:
		// Notifications and responses; a request only when it was
		// cancelled, and then the client expects no response.
		bridgeDiscard(resp)
		return nil, nil
	case resp.StatusCode/100 != 2:
		return ids, bridgeHTTPError(resp)
	case mediaType == "text/event-stream":
		es := newBridgeEvents(resp.Body)
		for len(pending) > 0 || len(ids) == 0 {
			var data []byte
			if data, err = es.next(); err != nil {
				break
			}
			answered(data)
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("mcpgate ended the event stream before answering")
		}
	default:
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, bridgeMaxMessage+1))
		if body = bytes.TrimSpace(body); len(body) > 0 && err == nil {
			answered(body)
		}
		if err == nil {
			err = errors.New("mcpgate's answer held no response")
		}
	}
	if len(pending) == 0 {
		return nil, nil
	}
	missing := make([]json.RawMessage, 0, len(pending))
	for _, id := range ids {
		if _, ok := pending[string(id)]; ok {
			missing = append(missing, id)
		}
	}
	return missing, fmt.Errorf("%w; is mcpgate running? Check with: %s", err, b.hint)
}

// bridgeAnswered removes from pending the ids msg (a message or a batch)
// responds to.
func bridgeAnswered(msg []byte, pending map[string]json.RawMessage) {
	items := []json.RawMessage{msg}
	if jsonrpc.IsBatch(msg) {
		items, _ = jsonrpc.ParseBatch(msg)
	}
	for _, item := range items {
		// A request to the client has an id too; only responses count.
		if _, _, isRequest := jsonrpc.Lookup(item, "method"); isRequest {
			continue
		}
		if id, _, ok := jsonrpc.Lookup(item, "id"); ok {
			delete(pending, string(id))
		}
	}
}

// bridgeHTTPError turns a refusal into an error: the daemon's own JSON-RPC
// error when its body holds one, else the HTTP status and body.
func bridgeHTTPError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if msg, err := jsonrpc.Parse(body); err == nil && msg.Error != nil {
		return jsonrpc.DecodeError(msg.Error)
	}
	text := string(bytes.TrimSpace(body))
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	return fmt.Errorf("mcpgate answered HTTP %d: %s", resp.StatusCode, text)
}

// bridgeDiscard reads the rest of a body so its connection can be reused.
func bridgeDiscard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// answer responds to each request in ids with err, or logs err when the
// failed message was no request. Requests the client cancelled get no
// response, as MCP wants.
func (b *bridge) answer(ids []json.RawMessage, err error, what string) {
	if len(ids) == 0 {
		var unreachable *bridgeUnreachable
		if !errors.As(err, &unreachable) { // else logged already
			b.log.Warn("could not relay "+what+" to mcpgate", "err", err)
		}
		return
	}
	b.mu.Lock()
	ids = slices.DeleteFunc(slices.Clone(ids), func(id json.RawMessage) bool { return b.pending[string(id)] })
	b.mu.Unlock()
	e := &jsonrpc.Error{Code: codeUnreachable, Message: err.Error()}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		e = je
	}
	for _, id := range ids {
		b.out.write(jsonrpc.AppendError(nil, id, e))
	}
}

// refuseTooLong answers a line longer than the bridge accepts, when its id
// can be found.
func (b *bridge) refuseTooLong(e *jsonrpc.ErrLineTooLong) {
	err := jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "message too large: mcpgatectl bridge accepts at most %d bytes", e.Limit)
	id, ok := jsonrpc.LeadingID(e.Head)
	if !ok {
		b.log.Warn("dropped a message from the client", "err", err)
		return
	}
	b.out.write(jsonrpc.AppendError(nil, jsonrpc.IntID(id), err))
}

// renewSession starts a new session with the client's initialize request,
// when the daemon no longer knows session gen stale. The client is told
// the lists changed, since the daemon may now serve different ones.
func (b *bridge) renewSession(ctx context.Context, stale int) error {
	b.renew.Lock()
	defer b.renew.Unlock()
	b.mu.Lock()
	cur, init, closing := b.session, b.initRequest, b.closing
	b.mu.Unlock()
	switch {
	case cur.gen != stale:
		return nil // renewed meanwhile
	case closing || init == nil:
		return errors.New("the mcpgate session ended")
	}
	b.log.Warn("mcpgate no longer knows the session (did it restart?); starting a new one", "session", cur.id)
	msg, err := jsonrpc.Parse(init)
	if err != nil {
		return err
	}
	sess, result, _, err := b.startSession(ctx, init, msg.ID, func([]byte) {})
	if err == nil && result == nil {
		err = errors.New("mcpgate refused to start a new session")
	}
	if err != nil {
		return fmt.Errorf("the mcpgate session ended and a new one could not start: %w", err)
	}
	resp, err := b.do(ctx, http.MethodPost, jsonrpc.AppendNotification(nil, "notifications/initialized", nil), sess, "", nil)
	if err != nil {
		return fmt.Errorf("the mcpgate session ended and a new one could not start: %w", err)
	}
	bridgeDiscard(resp)
	b.mu.Lock()
	sess.gen = stale + 1
	b.session = sess
	b.mu.Unlock()
	for _, list := range []string{"tools", "prompts", "resources"} {
		if _, _, ok := jsonrpc.LookupPath(result, "capabilities", list); ok {
			b.out.write(jsonrpc.AppendNotification(nil, "notifications/"+list+"/list_changed", nil))
		}
	}
	return nil
}

// endSession deletes the session at the daemon, which cancels what is
// still running there.
func (b *bridge) endSession() {
	b.deleteSession(b.currentSession())
}

func (b *bridge) deleteSession(sess bridgeSession) {
	if sess.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := b.do(ctx, http.MethodDelete, nil, sess, "", nil)
	if err != nil {
		return
	}
	bridgeDiscard(resp)
}

// listen starts relaying the session's standalone event stream, once.
func (b *bridge) listen(ctx context.Context) {
	b.mu.Lock()
	started := b.listening
	b.listening = true
	b.mu.Unlock()
	if started {
		return
	}
	b.tasks.Add(1)
	go func() {
		defer b.tasks.Done()
		b.listenLoop(ctx)
	}()
}

// listenLoop keeps the standalone event stream open until ctx ends,
// re-opening it with Last-Event-ID when it drops so that nothing sent
// meanwhile is lost, and following the session when it is renewed.
func (b *bridge) listenLoop(ctx context.Context) {
	var lastID string
	gen := b.currentSession().gen
	retry := time.Second
	failures := 0
	for ctx.Err() == nil {
		sess := b.currentSession()
		if sess.gen != gen {
			lastID, gen = "", sess.gen
		}
		resp, err := b.do(ctx, http.MethodGet, nil, sess, lastID, nil)
		switch {
		case err != nil:
			failures++
		case resp.StatusCode == http.StatusMethodNotAllowed:
			bridgeDiscard(resp)
			b.log.Info("mcpgate offers no standalone event stream; server-initiated messages come only with responses")
			return
		case resp.StatusCode == http.StatusNotFound && sess.id != "":
			bridgeDiscard(resp)
			if err := b.renewSession(ctx, sess.gen); err != nil {
				if ctx.Err() == nil {
					b.log.Warn("cannot re-open the event stream", "err", err)
				}
				failures++
			} else {
				failures = 0
				continue
			}
		case resp.StatusCode != http.StatusOK:
			err := bridgeHTTPError(resp)
			resp.Body.Close()
			b.log.Warn("mcpgate refused the event stream", "err", err)
			failures++
		default:
			es := newBridgeEvents(resp.Body)
			es.lastID = lastID
			for {
				data, err := es.next()
				if err != nil {
					break
				}
				b.out.write(data)
			}
			resp.Body.Close()
			lastID = es.lastID
			if es.retry > 0 {
				retry = es.retry
			}
			failures = 0
		}
		delay := min(retry<<min(failures, 5), bridgeRetryMax)
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
	}
}

// bridgeOut is the client's stdout: one message per line, whole lines
// only, in the order they are written.
type bridgeOut struct {
	log  *slog.Logger
	fail func() // called once when a write fails: the client is gone

	mu  sync.Mutex
	w   io.Writer
	err error
}

// write writes msg as one line, removing line breaks between JSON tokens.
func (o *bridgeOut) write(msg []byte) {
	msg = jsonrpc.Compact(bytes.TrimSpace(msg))
	if len(msg) == 0 {
		return
	}
	if bytes.ContainsAny(msg, "\r\n") {
		o.log.Warn("dropped a message from mcpgate that is not JSON", "head", string(msg[:min(len(msg), 80)]))
		return
	}
	line := make([]byte, 0, len(msg)+1)
	line = append(append(line, msg...), '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	if _, err := o.w.Write(line); err != nil {
		o.err = err
		o.log.Info("the client stopped reading; ending the session", "err", err)
		if o.fail != nil {
			o.fail()
		}
	}
}

// bridgeEvents reads a text/event-stream as the HTML specification
// defines it: lines end with CRLF, LF or CR; data lines of one event are
// joined with LF; comments and fields other than data, event, id and retry
// are ignored.
type bridgeEvents struct {
	sc     *bufio.Scanner
	lastID string        // the last event id seen, for Last-Event-ID
	retry  time.Duration // the reconnection delay the server asked for
}

func newBridgeEvents(r io.Reader) *bridgeEvents {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), bridgeMaxMessage+4096)
	sc.Split(bridgeScanLines)
	return &bridgeEvents{sc: sc}
}

// bridgeScanLines splits an event stream into lines ended by CRLF, LF or
// CR. A final line without an ending is returned too; next discards its
// unfinished event.
func bridgeScanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF && len(data) > 0:
		return len(data), data, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	default:
		return 0, nil, nil // a CR at the end: an LF may follow
	}
}

// line returns the next line, which is valid until the next call.
func (s *bridgeEvents) line() ([]byte, error) {
	if s.sc.Scan() {
		return s.sc.Bytes(), nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// next returns the data of the next event of type "message" (the default)
// that carries data. Events with empty data, such as the priming events
// that only set an id, are skipped. At the end of the stream it returns
// io.EOF, or the read error.
func (s *bridgeEvents) next() ([]byte, error) {
	var data []byte
	var hasData bool
	event := ""
	for {
		line, err := s.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			// Dispatch.
			if hasData && (event == "" || event == "message") && len(bytes.TrimSpace(data)) > 0 {
				return data, nil
			}
			data, hasData, event = nil, false, ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		case "event":
			event = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}
