// Package mcphttp is the client side of MCP over HTTP (Streamable HTTP and
// the legacy HTTP+SSE transport): header names, the event stream reader,
// and a session that posts messages and reads their answers.
package mcphttp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// HTTP header names and media types of the Streamable HTTP transport.
const (
	HeaderSession  = "Mcp-Session-Id"
	HeaderProtocol = "Mcp-Protocol-Version"
	HeaderLastID   = "Last-Event-Id"
	MediaJSON      = "application/json"
	MediaSSE       = "text/event-stream"
	// AcceptPost is the Accept header of a POST: a server may answer with
	// either.
	AcceptPost = MediaJSON + ", " + MediaSSE
)

// Session is a server's session as the client knows it. Gen counts
// sessions, so that a stale one is renewed only once.
type Session struct {
	ID       string
	Protocol string
	Gen      int
}

// Options configure a Client.
type Options struct {
	Endpoint string       // the URL messages are posted to
	HTTP     *http.Client // does every exchange
	// Header holds headers sent with every request besides the
	// transport's own, such as Authorization. Their values are never
	// part of an error.
	Header http.Header
	// Secrets are values (such as the token in a header) that no error
	// the client returns may contain, even when the server echoes them.
	Secrets []string
	// MaxMessageBytes bounds one message read from the server.
	MaxMessageBytes int
	// Peer names the server in errors, e.g. "mcpgate" or `backend "github"`.
	Peer string
	// Reached, if set, is called after every HTTP exchange with nil when
	// the server answered, or with the error of an exchange that failed
	// for want of a connection; what it returns is the error reported.
	Reached func(error) error
	// OnRenew, if set, is called with the new initialize result after a
	// session the server no longer knew was replaced.
	OnRenew func(result json.RawMessage)
}

// Client is one client session over Streamable HTTP. It remembers the
// initialize request so that a session the server forgot (HTTP 404) is
// replaced transparently. Its methods are safe for concurrent use.
type Client struct {
	opts Options

	mu          sync.Mutex
	session     Session
	initRequest []byte
	closing     bool

	renew sync.Mutex // serialises starting a new session
}

// NewClient returns a client with no session.
func NewClient(opts Options) *Client {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 16 << 20
	}
	if opts.Peer == "" {
		opts.Peer = "the server"
	}
	// A client of our own, so that whatever the caller's does about
	// redirects, this one never follows one to another origin.
	hc := *cmp.Or(opts.HTTP, http.DefaultClient)
	hc.CheckRedirect = sameOrigin(opts.Peer)
	opts.HTTP = &hc
	return &Client{opts: opts}
}

// Session returns the current session.
func (c *Client) Session() Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// UnreachableError is the error of an exchange that failed for want of a
// connection.
type UnreachableError struct {
	Err  error
	Dial bool // the connection could not be made at all
}

func (e *UnreachableError) Error() string { return e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// Do sends one HTTP request to the endpoint with the session's headers.
// sent, if not nil, is called once the request was written. A transport
// failure is an *UnreachableError (after Options.Unreachable); a redirect
// to another origin is a *RedirectError, and is not followed.
func (c *Client) Do(ctx context.Context, method string, body []byte, sess Session, lastEventID string, sent func()) (*http.Response, error) {
	return c.DoURL(ctx, c.opts.Endpoint, method, body, sess, lastEventID, sent)
}

// DoURL is Do for another URL of the same server, such as the message
// endpoint of the legacy SSE transport.
func (c *Client) DoURL(ctx context.Context, endpoint, method string, body []byte, sess Session, lastEventID string, sent func()) (*http.Response, error) {
	resp, err := c.do(ctx, endpoint, method, body, sess, lastEventID, sent)
	return resp, c.redact(err)
}

func (c *Client) do(ctx context.Context, endpoint, method string, body []byte, sess Session, lastEventID string, sent func()) (*http.Response, error) {
	return c.doHeaders(ctx, endpoint, method, body, sess, lastEventID, sent, nil)
}

// doHeaders is do with headers of the caller's: set, if not nil, adds
// them to the request.
func (c *Client) doHeaders(ctx context.Context, endpoint, method string, body []byte, sess Session, lastEventID string, sent func(), set func(*http.Request)) (*http.Response, error) {
	if sent != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { sent() },
		})
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.opts.Header {
		req.Header[k] = vs
	}
	switch method {
	case http.MethodPost:
		req.Header.Set("Content-Type", MediaJSON)
		req.Header.Set("Accept", AcceptPost)
	case http.MethodGet:
		req.Header.Set("Accept", MediaSSE)
	}
	if sess.ID != "" {
		req.Header.Set(HeaderSession, sess.ID)
	}
	if sess.Protocol != "" {
		req.Header.Set(HeaderProtocol, sess.Protocol)
	}
	if lastEventID != "" {
		req.Header.Set(HeaderLastID, lastEventID)
	}
	if set != nil {
		set(req)
	}
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var re *RedirectError
		if errors.As(err, &re) {
			if c.opts.Reached != nil {
				c.opts.Reached(nil) // it answered, with a redirect
			}
			return nil, re
		}
		var op *net.OpError
		ue := &UnreachableError{Err: err, Dial: errors.As(err, &op) && op.Op == "dial"}
		if c.opts.Reached != nil {
			ue.Err = c.opts.Reached(err)
		}
		return nil, ue
	}
	if c.opts.Reached != nil {
		c.opts.Reached(nil)
	}
	return resp, nil
}

// Initialize POSTs an initialize request (id is its id) without a
// session, passes every message of the answer to deliver, and makes the
// session it started current. It returns the initialize result; when the
// server answered with a JSON-RPC error instead, result is nil and err
// nil. err says why there was no answer at all.
func (c *Client) Initialize(ctx context.Context, body []byte, id json.RawMessage, deliver func([]byte)) (result json.RawMessage, err error) {
	c.mu.Lock()
	c.initRequest = body
	c.mu.Unlock()
	sess, result, err := c.start(ctx, body, id, deliver)
	if err != nil || result == nil {
		return nil, c.redact(err)
	}
	c.mu.Lock()
	sess.Gen = c.session.Gen + 1
	c.session = sess
	c.mu.Unlock()
	return result, nil
}

func (c *Client) start(ctx context.Context, body []byte, id json.RawMessage, deliver func([]byte)) (sess Session, result json.RawMessage, err error) {
	resp, err := c.Do(ctx, http.MethodPost, body, Session{}, "", nil)
	if err != nil {
		return sess, nil, err
	}
	_, err = ReadAnswer(resp, []json.RawMessage{id}, c.opts.MaxMessageBytes, c.opts.Peer, func(msg []byte) {
		if r, ok := resultFor(msg, id); ok {
			result = append(json.RawMessage(nil), r...)
		}
		deliver(msg)
	})
	if err != nil || result == nil {
		return sess, nil, err
	}
	sess.ID = resp.Header.Get(HeaderSession)
	if v, _, ok := jsonrpc.Lookup(result, "protocolVersion"); ok {
		sess.Protocol, _ = jsonrpc.StringValue(v)
	}
	return sess, result, nil
}

// resultFor returns the result of msg if it is the successful response to
// the request id.
func resultFor(msg []byte, id json.RawMessage) (json.RawMessage, bool) {
	m, err := jsonrpc.Parse(msg)
	if err != nil || !m.IsResponse() || !bytes.Equal(m.ID, id) || m.Result == nil {
		return nil, false
	}
	return m.Result, true
}

// Exchange POSTs a message to the session and passes every message of
// the answer to deliver. ids are the requests in it; missing are those the
// answer held no response for, and err says why. sent, if not nil, is
// called once the message was written. A session the server no longer
// knows (HTTP 404) is replaced by a new one and the message sent again,
// once: the server did not process it.
func (c *Client) Exchange(ctx context.Context, body []byte, ids []json.RawMessage, sent func(), deliver func([]byte)) (missing []json.RawMessage, err error) {
	return c.ExchangeRoom(ctx, body, ids, 0, sent, func(buf []byte, at int) { deliver(buf[at:]) })
}

// ExchangeRoom is Exchange for a caller that answers in place (see
// ReadAnswerRoom): every message of the answer is delivered in a buffer
// of its own, at or after room spare bytes.
func (c *Client) ExchangeRoom(ctx context.Context, body []byte, ids []json.RawMessage, room int, sent func(), deliver func(buf []byte, at int)) (missing []json.RawMessage, err error) {
	for attempt := 0; ; attempt++ {
		sess := c.Session()
		resp, err := c.Do(ctx, http.MethodPost, body, sess, "", sent)
		if err != nil {
			return ids, err
		}
		if resp.StatusCode == http.StatusNotFound && sess.ID != "" && attempt == 0 {
			Discard(resp)
			if err := c.Renew(ctx, sess.Gen); err != nil {
				return ids, err
			}
			continue
		}
		missing, err := ReadAnswerRoom(resp, ids, c.opts.MaxMessageBytes, room, c.opts.Peer, deliver)
		return missing, c.redact(err)
	}
}

// Renew starts a new session with the remembered initialize request when
// the server no longer knows session gen stale, and sends
// notifications/initialized. Options.OnRenew learns the new result.
func (c *Client) Renew(ctx context.Context, stale int) error {
	c.renew.Lock()
	defer c.renew.Unlock()
	c.mu.Lock()
	cur, init, closing := c.session, c.initRequest, c.closing
	c.mu.Unlock()
	switch {
	case cur.Gen != stale:
		return nil // renewed meanwhile
	case closing || init == nil:
		return fmt.Errorf("the %s session ended", c.opts.Peer)
	}
	msg, err := jsonrpc.Parse(init)
	if err != nil {
		return err
	}
	sess, result, err := c.start(ctx, init, msg.ID, func([]byte) {})
	if err == nil && result == nil {
		err = fmt.Errorf("%s refused to start a new session", c.opts.Peer)
	}
	if err != nil {
		return c.redact(fmt.Errorf("the %s session ended and a new one could not start: %w", c.opts.Peer, err))
	}
	resp, err := c.Do(ctx, http.MethodPost, jsonrpc.AppendNotification(nil, "notifications/initialized", nil), sess, "", nil)
	if err != nil {
		return fmt.Errorf("the %s session ended and a new one could not start: %w", c.opts.Peer, err)
	}
	Discard(resp)
	c.mu.Lock()
	sess.Gen = stale + 1
	c.session = sess
	c.mu.Unlock()
	if c.opts.OnRenew != nil {
		c.opts.OnRenew(result)
	}
	return nil
}

// Close ends the session at the server, which cancels what still runs
// there, and starts no new one.
func (c *Client) Close(ctx context.Context) {
	c.mu.Lock()
	c.closing = true
	sess := c.session
	c.mu.Unlock()
	c.Delete(ctx, sess)
}

// Delete ends session sess at the server.
func (c *Client) Delete(ctx context.Context, sess Session) {
	if sess.ID == "" {
		return
	}
	resp, err := c.Do(ctx, http.MethodDelete, nil, sess, "", nil)
	if err != nil {
		return
	}
	Discard(resp)
}
