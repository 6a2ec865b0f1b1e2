package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// remote is the other kind of connection a Conn can have: an MCP session
// with a server reached over HTTP instead of a child's stdio. Everything
// above the wire (ids, the pending map, dispatch, lists) is the Conn's, as
// for a child; the remote only moves messages. Requests are posted
// concurrently, each reading its own answer; notifications and responses
// go in order; the server's own messages come on its GET stream.
type remote struct {
	c       *Conn
	url     string // the URL as shown: without its query
	client  *mcphttp.Client
	http    *http.Client
	unix    *mcphttp.UnixDialer // the server's unix socket; nil over TCP
	legacy  *legacySSE          // the HTTP+SSE transport, when configured
	maxSize int

	ctx    context.Context // ends every exchange of the session
	cancel context.CancelFunc
	outq   chan []byte // notifications and responses not waited for, in order
	tasks  sync.WaitGroup

	state sessionState // repeated to a new session after a 404

	mu        sync.Mutex
	posts     map[int64]context.CancelFunc // requests being posted, by our id
	listening bool
	ended     bool // set by end before it waits for tasks: no task starts after
	endOnce   sync.Once

	params atomic.Pointer[paramIndex] // tools with Mcp-Param-* headers
}

// newRemote prepares the session with b's server; nothing is sent before
// start.
func newRemote(b *Backend) (*remote, error) {
	var unix *mcphttp.UnixDialer
	var hc *http.Client
	var err error
	if socket := b.cfg.UnixSocket(); socket != "" {
		// Plain HTTP/1.1 on the socket: the kernel, not TLS, says who is
		// at the other end (see Peer).
		unix = &mcphttp.UnixDialer{Path: socket}
		hc = &http.Client{Transport: unix.Transport(b.cfg.MaxConnections)}
	} else if hc, err = httpClient(&b.cfg.Remote); err != nil {
		return nil, err
	}
	hc.Transport = b.opts.Telemetry.Transport(hc.Transport) // each call's traceparent, as in its _meta
	if hc, err = b.withToken(hc); err != nil {
		return nil, err
	}
	header := http.Header{}
	var secrets []string
	for k, v := range b.cfg.Headers {
		val, err := expandCredentials(v, b.opts.CredentialsDirectory)
		if err != nil {
			return nil, fmt.Errorf("headers.%s: %w", k, err)
		}
		header.Set(k, val)
		if val != v {
			secrets = append(secrets, val)
			for _, name := range config.CredentialRefs(v) {
				if c, err := config.ReadCredential(b.opts.CredentialsDirectory, name); err == nil {
					secrets = append(secrets, c)
				}
			}
		}
	}
	secrets = append(secrets, urlSecrets(b.cfg.Endpoint())...)
	r := &remote{
		url:     DisplayURL(b.cfg),
		http:    hc,
		unix:    unix,
		maxSize: int(b.opts.MaxMessageBytes),
		outq:    make(chan []byte, 256),
		posts:   map[int64]context.CancelFunc{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	peer := fmt.Sprintf("backend %q", b.name)
	r.client = mcphttp.NewClient(mcphttp.Options{
		Endpoint:        b.cfg.Endpoint(),
		HTTP:            hc,
		Header:          header,
		Secrets:         secrets,
		MaxMessageBytes: r.maxSize,
		Peer:            peer,
		Reached: func(err error) error {
			if err == nil {
				return nil
			}
			// url.Error repeats the whole URL, query and all; say it
			// without the query.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return fmt.Errorf("cannot reach %s at %s: %w", peer, r.url, err)
		},
		OnRenew: func(json.RawMessage) {
			r.c.log.Warn(fmt.Sprintf("backend %q: the server no longer knew the session (it expired or restarted); started a new one", r.c.b.name), "url", r.url)
			r.replay()
			// The new session may serve other lists.
			for _, m := range []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"} {
				r.c.lists.notify(m)
			}
		},
	})
	if b.cfg.Transport == "sse" {
		r.legacy = &legacySSE{r: r}
	}
	return r, nil
}

// DisplayURL is how a remote backend's URL is shown in logs, D-Bus and
// status: its display_url, else only its origin (scheme://host:port), or
// unix: and the socket's path, since its HTTP path and query may carry a
// key.
func DisplayURL(cfg *config.Backend) string {
	if cfg.DisplayURL != "" {
		return cfg.DisplayURL
	}
	if socket := cfg.UnixSocket(); socket != "" {
		return "unix:" + socket
	}
	return mcphttp.OriginOf(cfg.URL)
}

// minPathSecret is the shortest path segment of a URL treated as a
// secret: shorter ones are words such as "mcp" or "v1".
const minPathSecret = 16

// urlSecrets returns the parts of a remote URL that may carry a key and
// must not show in an error even when the server echoes them: its query
// and its values, and its long path segments.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var secrets []string
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
		for _, vs := range u.Query() {
			secrets = append(secrets, vs...)
		}
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if len(seg) >= minPathSecret {
			secrets = append(secrets, seg)
			if s, err := url.PathUnescape(seg); err == nil && s != seg {
				secrets = append(secrets, s)
			}
		}
	}
	return secrets
}

// start runs the goroutine that posts queued messages. The session itself
// starts with the handshake's initialize request.
func (r *remote) start(c *Conn) {
	r.c = c
	r.task(r.writeLoop)
	if r.legacy != nil {
		r.task(r.legacy.run)
	}
}

// task runs fn on a goroutine that end waits for, and reports true; once
// end has begun it runs nothing and reports false. A task started while
// end waited would break sync.WaitGroup's rule that an Add from zero
// happens before the Wait, and would outlive the session it belongs to.
func (r *remote) task(fn func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return false
	}
	r.tasks.Add(1)
	go func() {
		defer r.tasks.Done()
		fn()
	}()
	return true
}

func (r *remote) writeLoop() {
	for {
		select {
		case msg := <-r.outq:
			// Bounded, so that a server that never takes one message
			// cannot hold up the ones queued behind it.
			ctx, cancel := context.WithTimeout(r.ctx, r.c.b.cfg.Timeout)
			r.post(ctx, msg)
			cancel()
		case <-r.ctx.Done():
			return
		}
	}
}

// send delivers one message. A request is posted on its own goroutine and
// answered through the Conn's pending map; other messages are posted
// before send returns, so that the server sees them in order
// (notifications/initialized before the first list request).
func (r *remote) send(ctx context.Context, data []byte) error {
	select {
	case <-r.ctx.Done():
		return ErrGone
	default:
	}
	msg, err := jsonrpc.Parse(data)
	if err != nil {
		return err
	}
	if !msg.IsRequest() {
		ctx, cancel := context.WithTimeout(ctx, r.c.b.cfg.Timeout) // whatever the caller's ctx
		defer cancel()
		if err := r.post(ctx, data); err != nil {
			return err
		}
		if msg.Method == "notifications/initialized" {
			r.listen()
		}
		return nil
	}
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	if err != nil {
		return fmt.Errorf("remote request id %s is not ours", msg.ID)
	}
	r.state.remember(msg)
	pctx, cancel := context.WithCancel(r.ctx)
	pctx = telemetry.Carry(pctx, ctx) // the call's span, for its headers and its token
	if r.c.b.cfg.OAuthTokenExchange {
		if caller := callerOf(ctx); caller != nil {
			if err := r.c.b.countUpstream(caller); err != nil {
				cancel()
				r.c.warnServer("no-oauth-token", err.Error(), "identity", caller.Identity, "method", msg.Method)
				return err
			}
			pctx = context.WithValue(pctx, CallerKey{}, caller) // for exchangeTransport
		}
	}
	r.mu.Lock()
	r.posts[id] = cancel
	r.mu.Unlock()
	posted := r.task(func() {
		defer r.forget(id)
		err := r.request(pctx, data, msg, id)
		if err == nil || pctx.Err() != nil {
			return
		}
		if call := r.c.take(id); call != nil {
			if msg.Method != "initialize" { // a failed handshake is journaled with its detail
				// The client learns the cause; the detail, which can quote
				// the server's answer, goes to the journal.
				r.c.log.InfoContext(pctx, "a request to the server failed", "method", msg.Method, "err", err)
				err = r.c.b.public(err)
			}
			call.deliver(nil, err)
		}
	})
	if !posted {
		r.forget(id)
		return ErrGone
	}
	return nil
}

// request posts a request and dispatches what answers it. The answer to
// initialize is dispatched only once its session is current, so that
// what the handshake sends next goes to that session.
func (r *remote) request(ctx context.Context, data []byte, msg *jsonrpc.Message, id int64) error {
	if r.legacy != nil {
		return r.legacy.post(ctx, data)
	}
	if r.c.modern.Load() || msg.Method == "server/discover" || r.c.dual.Load() && r.c.modernCall(id) {
		// No session: the era's headers on every request.
		_, err := r.client.PostStatelessRoom(ctx, data, mcphttp.StatelessHeaders(ModernProtocolVersion, msg), r.mirroredParams(msg), []json.RawMessage{msg.ID}, jsonrpc.SpliceRoom, r.deliverRoom)
		return r.lost(err)
	}
	if msg.Method == "initialize" {
		var answer [][]byte
		_, err := r.client.Initialize(ctx, data, msg.ID, func(b []byte) { answer = append(answer, b) })
		for _, b := range answer {
			r.deliver(b)
		}
		return r.lost(err)
	}
	_, err := r.client.ExchangeRoom(ctx, data, []json.RawMessage{msg.ID}, jsonrpc.SpliceRoom, nil, r.deliverRoom)
	var tooLarge *mcphttp.EventTooLargeError
	var redirect *mcphttp.RedirectError
	switch {
	case errors.As(err, &redirect):
		r.c.warnServer("redirect", fmt.Sprintf("backend %q: refused a redirect to another origin", r.c.b.name), "err", err, "method", msg.Method)
	case errors.As(err, &tooLarge):
		r.c.warnServer("too-large", fmt.Sprintf("backend %q: dropped a message from the server", r.c.b.name), "err", err, "start", truncate(tooLarge.Head, 100))
		return fmt.Errorf("backend %q answered %s with a %w: the limit is %d bytes (max_message_bytes)", r.c.b.name, msg.Method, ErrTooLarge, tooLarge.Max)
	}
	return r.lost(err)
}

// tooLarge handles an event dropped for its size on a stream that no
// call owns (the GET stream, the legacy stream) as a child's line too
// long: journaled, and the call it answers, when its first bytes say
// which, fails now rather than at its timeout.
func (r *remote) tooLarge(e *mcphttp.EventTooLargeError) {
	r.c.warnServer("too-large", fmt.Sprintf("backend %q: dropped a message from the server", r.c.b.name), "err", e, "start", truncate(e.Head, 100))
	r.c.tooLarge(&jsonrpc.ErrLineTooLong{Limit: int64(e.Max), Head: e.Head})
}

// post sends a notification or response and waits for the server to take
// it.
func (r *remote) post(ctx context.Context, data []byte) error {
	if r.legacy != nil {
		return r.legacy.post(ctx, data)
	}
	_, err := r.client.Exchange(ctx, data, nil, nil, r.deliver)
	if err != nil && r.ctx.Err() == nil {
		r.c.log.Warn(fmt.Sprintf("backend %q: could not send a message to the server: %v", r.c.b.name, err), "url", r.url, "err", err)
	}
	return r.lost(err)
}

// lost ends the session when err says the server cannot be reached at
// all: like a child that died, it is restarted with the backoff.
func (r *remote) lost(err error) error {
	var ue *mcphttp.UnreachableError
	if errors.As(err, &ue) && ue.Dial {
		r.end(err.Error())
	}
	return err
}

// deliver dispatches a message (or a batch) the server sent.
func (r *remote) deliver(data []byte) {
	r.c.reads.Add(1) // a sign of life, as a line from a child is
	items := [][]byte{data}
	if jsonrpc.IsBatch(data) {
		batch, err := jsonrpc.ParseBatch(data)
		if err != nil {
			r.c.warnServer("invalid", fmt.Sprintf("backend %q: dropped an invalid batch from the server: %v", r.c.b.name, err), "err", err)
			return
		}
		items = items[:0]
		for _, it := range batch {
			items = append(items, it)
		}
	}
	for _, it := range items {
		msg, err := jsonrpc.Parse(jsonrpc.Compact(it))
		if err != nil {
			r.c.warnServer("invalid", fmt.Sprintf("backend %q: dropped invalid output of the server: %v", r.c.b.name, err), "err", err, "message", truncate(it, 200))
			continue
		}
		r.c.dispatch(msg)
	}
	r.c.endBurst()
}

// deliverRoom is deliver for a message the server answered a request
// with, read into a buffer of its own (buf, the message at buf[at:]): a
// response is parsed with the room in front, so that the client's id (and
// what a 2026-07-28 client's result gets) is spliced in over the same
// bytes, and a large result is never copied.
func (r *remote) deliverRoom(buf []byte, at int) {
	if jsonrpc.IsBatch(buf[at:]) || at < jsonrpc.SpliceRoom {
		r.deliver(buf[at:])
		return
	}
	r.c.reads.Add(1)
	// Line breaks can only be whitespace in valid JSON; spaces in their
	// place, in the buffer that is ours, keep it one line for the client.
	for _, nl := range []byte("\n\r") {
		for b := buf[at:]; ; {
			i := bytes.IndexByte(b, nl)
			if i < 0 {
				break
			}
			b[i], b = ' ', b[i+1:]
		}
	}
	msg, err := jsonrpc.ParseRoom(buf, at)
	if err != nil {
		r.c.warnServer("invalid", fmt.Sprintf("backend %q: dropped invalid output of the server: %v", r.c.b.name, err), "err", err, "message", truncate(buf[at:], 200))
		r.c.endBurst()
		return
	}
	r.c.dispatch(msg)
	r.c.endBurst()
}

// trySend queues a message without waiting.
func (r *remote) trySend(msg []byte) {
	select {
	case r.outq <- msg:
	default:
		r.c.log.Warn(fmt.Sprintf("backend %q: dropped a message to the server: too many are waiting to be sent", r.c.b.name), "message", truncate(msg, 200))
	}
}

// abandon stops posting request id; its answer no longer matters.
func (r *remote) abandon(id int64) {
	r.mu.Lock()
	cancel := r.posts[id]
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (r *remote) forget(id int64) {
	r.mu.Lock()
	cancel := r.posts[id]
	delete(r.posts, id)
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// listen opens the server's GET stream once, for the messages it sends on
// its own (list_changed, sampling, logging).
func (r *remote) listen() {
	r.mu.Lock()
	started := r.listening
	r.listening = true
	r.mu.Unlock()
	if started || r.legacy != nil {
		return
	}
	b := r.c.b
	r.task(func() {
		err := r.client.Listen(r.ctx, mcphttp.ListenOptions{
			Deliver:  r.deliver,
			TooLarge: r.tooLarge,
			Logger:   r.c.log,
			RetryMin: b.cfg.RestartBackoffInitial,
			RetryMax: b.cfg.RestartBackoffMax,
			GiveUp: func(err error, failures int) bool {
				var ue *mcphttp.UnreachableError
				return errors.As(err, &ue) && ue.Dial && failures >= 2
			},
		})
		switch {
		case errors.Is(err, mcphttp.ErrNoStream):
			r.c.log.Debug("the server offers no GET stream; its messages come only with responses", "url", r.url)
		case err != nil:
			r.end("its event stream cannot be re-opened: " + err.Error())
		}
	})
}

// end closes the session for good: every exchange stops, every call in
// flight fails with why, and the Conn is done.
func (r *remote) end(why string) {
	r.endOnce.Do(func() {
		r.c.reason.CompareAndSwap(nil, ptr(why))
		r.cancel()
		r.mu.Lock()
		r.ended = true
		r.mu.Unlock()
		go func() {
			r.tasks.Wait()
			r.http.CloseIdleConnections()
			r.c.exit = ExitInfo{Code: -1, Text: "session ended"}
			close(r.c.exited)
			why := r.c.exit.Text
			if p := r.c.reason.Load(); p != nil {
				why = *p
			}
			r.c.b.opts.Handler.Exited(r.c.b, r.c) // as for a child: its relayed requests end
			// why can quote the server: the journal has it (crashed).
			r.c.fail(&publicError{
				msg: fmt.Sprintf("backend %q: %s: the session ended", r.c.b.name, ErrGone), cause: "session ended",
				detail: fmt.Errorf("backend %q: %w: %s", r.c.b.name, ErrGone, why),
			})
			close(r.c.done)
		}()
	})
}

// shutdown ends the session at the server (DELETE), within grace, and
// then here.
func (r *remote) shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	r.client.Close(ctx)
	cancel()
	r.end("closed")
	<-r.c.done
}

// kill drops the session without telling the server.
func (r *remote) kill() {
	r.end("dropped")
	<-r.c.done
}
