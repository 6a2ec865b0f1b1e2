package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
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

// runBridge runs "mcpgatectl bridge": a stdio MCP server that relays to
// mcpgate's Streamable HTTP endpoint. It parses --socket, --url, --endpoint
// and --user. It returns 0 when stdin ends or on SIGINT/SIGTERM, 2 for bad
// arguments.
func runBridge(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpgatectl bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mcpgatectl bridge [--user] [--socket PATH [--endpoint PATH] | --url URL] [--profile NAME] [--token-file FILE]\n\n"+
			"Serves MCP on stdin/stdout for clients that start servers as commands, relaying\n"+
			"every message to the mcpgate daemon.\n\n")
		fs.PrintDefaults()
	}
	socket := fs.String("socket", "", "connect to the daemon's unix `socket` (default "+bridgeSystemSocket+
		", with --user $XDG_RUNTIME_DIR/mcpgate/mcpgate.sock)")
	rawURL := fs.String("url", "", "connect to the daemon's MCP endpoint at `URL` instead, e.g. http://127.0.0.1:7431/mcp, or unix:SOCKET:PATH on a unix socket")
	endpoint := fs.String("endpoint", bridgeEndpoint, "the MCP endpoint `path` on the socket, as set by endpoint in [gateway]")
	user := fs.Bool("user", false, "talk to the user's mcpgate (systemctl --user) rather than the system's")
	profile := fs.String("profile", "", "talk to the endpoint of profile `NAME` ([profiles.NAME]), below the endpoint")
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
	opts := bridgeOptions{socket: *socket, url: *rawURL, endpoint: *endpoint, user: *user, profile: *profile}
	if set["url"] && (set["socket"] || set["endpoint"]) {
		fmt.Fprintln(stderr, "mcpgatectl bridge: --url cannot be combined with --socket or --endpoint; the URL names both the daemon and the endpoint")
		return 2
	}
	token, err := bridgeToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgatectl bridge: %v\n", err)
		return 2
	}
	opts.token = token
	b, err := newBridge(opts, stdout, stderr)
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
	profile  string // the profile whose endpoint to use; "" for the endpoint itself
	token    string // bearer token sent with every request; "" for none
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

	http *mcphttp.Client // the session with mcpgate

	mu          sync.Mutex
	listening   bool // the standalone stream loop was started
	unreachable bool // the last attempt to connect failed
	// pending are the client's requests in flight, by raw id; true once
	// the client cancelled one, which then gets no response from us when
	// its answer breaks off.
	pending map[string]bool

	requests sync.WaitGroup // POSTs of requests in flight
	tasks    sync.WaitGroup // every goroutine but the stdin reader
}

func newBridge(opts bridgeOptions, stdout, stderr io.Writer) (*bridge, error) {
	b := &bridge{
		out:     &bridgeOut{w: stdout},
		log:     slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "mcpgatectl-bridge"),
		hint:    "systemctl status mcpgate.socket",
		pending: map[string]bool{},
		token:   opts.token,
	}
	if opts.user {
		b.hint = "systemctl --user status mcpgate.socket"
	}
	b.out.log = b.log
	if opts.profile != "" && !validProfile(opts.profile) {
		return nil, fmt.Errorf("--profile %q is not a profile name; profiles are named with letters, digits, \"_\" and \"-\", as [profiles.NAME] in mcpgate.toml", opts.profile)
	}
	if strings.HasPrefix(opts.url, "unix:") {
		socket, path, err := config.ParseUnixURL(opts.url)
		if err != nil {
			return nil, fmt.Errorf("--url: %w", err)
		}
		opts.socket, opts.endpoint, opts.url = socket, path, ""
	}
	if opts.url != "" {
		u, err := url.Parse(opts.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--url %q is not an http:// or https:// URL; write one such as http://127.0.0.1:7431/mcp, or unix:/run/mcpgate/mcpgate.sock:/mcp for a unix socket", opts.url)
		}
		u.Path = profilePath(u.Path, opts.profile)
		b.endpoint, b.target = u.String(), opts.url
		b.http = b.newClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})
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
	b.endpoint = "http://localhost" + profilePath(opts.endpoint, opts.profile)
	dialer := &mcphttp.UnixDialer{Path: path}
	b.http = b.newClient(&http.Client{Transport: &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}})
	return b, nil
}

// newClient returns the session with mcpgate over hc. A session mcpgate
// no longer knows (it restarted, or expired the session) is replaced, and
// the client is told the lists changed, since mcpgate may now serve
// different ones.
func (b *bridge) newClient(hc *http.Client) *mcphttp.Client {
	var header http.Header
	var secrets []string
	if b.token != "" {
		header = http.Header{"Authorization": {"Bearer " + b.token}}
		secrets = []string{b.token}
	}
	return mcphttp.NewClient(mcphttp.Options{
		Endpoint:        b.endpoint,
		HTTP:            hc,
		Header:          header,
		Secrets:         secrets,
		MaxMessageBytes: bridgeMaxMessage,
		Peer:            "mcpgate",
		Reached: func(err error) error {
			if err != nil {
				err = b.unreachableError(err)
			}
			b.noteReachable(err == nil, err)
			return err
		},
		OnRenew: func(result json.RawMessage) {
			b.log.Warn("mcpgate no longer knew the session (did it restart?); starting a new one")
			for _, list := range []string{"tools", "prompts", "resources"} {
				if _, _, ok := jsonrpc.LookupPath(result, "capabilities", list); ok {
					b.out.write(jsonrpc.AppendNotification(nil, "notifications/"+list+"/list_changed", nil))
				}
			}
		},
	})
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
	endCtx, endCancel := context.WithTimeout(context.Background(), 2*time.Second)
	b.http.Close(endCtx) // cancels what still runs at the daemon
	endCancel()
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
	old := b.http.Session()
	result, err := b.http.Initialize(ctx, line, id, b.out.write)
	if err != nil {
		b.answer([]json.RawMessage{id}, b.withHint(err), "initialize")
		return
	}
	if result == nil {
		return // initialize failed; the client has the daemon's error
	}
	if old.ID != "" && old.ID != b.http.Session().ID {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.http.Delete(ctx, old) // the client started over
	}
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
	missing, err := b.http.Exchange(ctx, body, ids, markSent, b.out.write)
	if err != nil && ctx.Err() == nil {
		b.answer(missing, b.withHint(err), what)
	}
	return err == nil
}

// withHint adds to an error that is not mcpgate's own JSON-RPC error the
// command that shows why mcpgate did not answer.
func (b *bridge) withHint(err error) error {
	var je *jsonrpc.Error
	var unreachable *mcphttp.UnreachableError
	if errors.As(err, &je) || errors.As(err, &unreachable) {
		return err
	}
	return fmt.Errorf("%w; is mcpgate running? Check with: %s", err, b.hint)
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

// answer responds to each request in ids with err, or logs err when the
// failed message was no request. Requests the client cancelled get no
// response, as MCP wants.
func (b *bridge) answer(ids []json.RawMessage, err error, what string) {
	if len(ids) == 0 {
		var unreachable *mcphttp.UnreachableError
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

// listenLoop relays the session's standalone event stream until ctx
// ends.
func (b *bridge) listenLoop(ctx context.Context) {
	err := b.http.Listen(ctx, mcphttp.ListenOptions{Deliver: b.out.write, Logger: b.log, RetryMax: bridgeRetryMax})
	if errors.Is(err, mcphttp.ErrNoStream) {
		b.log.Info("mcpgate offers no standalone event stream; server-initiated messages come only with responses")
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

// profilePath is the endpoint of profile below endpoint (a path or URL).
func profilePath(endpoint, profile string) string {
	if profile == "" {
		return endpoint
	}
	return strings.TrimSuffix(endpoint, "/") + "/" + profile
}

// validProfile reports whether name can be a profile's name.
func validProfile(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return name != "" && len(name) <= 64
}
