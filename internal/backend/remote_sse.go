package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
)

// legacySSE is the deprecated HTTP+SSE transport (MCP 2024-11-05) that
// older servers still speak: one GET event stream carries everything the
// server sends, starting with an "endpoint" event that names the URL
// messages are posted to.
type legacySSE struct {
	r *remote

	once     sync.Once
	ready    chan struct{} // closed once endpoint is known
	endpoint string
}

func (l *legacySSE) init() { l.once.Do(func() { l.ready = make(chan struct{}) }) }

// run reads the event stream until it ends, which ends the session.
func (l *legacySSE) run() {
	l.init()
	r := l.r
	resp, err := r.client.Do(r.ctx, http.MethodGet, nil, mcphttp.Session{}, "", nil)
	if err != nil {
		r.end("cannot open the event stream: " + err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.end("the server refused the event stream: " + r.client.Redact(mcphttp.HTTPError(resp, fmt.Sprintf("backend %q", r.c.b.name)).Error()))
		return
	}
	es := mcphttp.NewEventReader(resp.Body, r.maxSize)
	for {
		ev, err := es.Next()
		var tooLarge *mcphttp.EventTooLargeError
		if errors.As(err, &tooLarge) {
			r.tooLarge(tooLarge)
			continue
		}
		if err != nil {
			break
		}
		switch ev.Type {
		case "endpoint":
			if l.endpoint != "" {
				continue
			}
			endpoint, err := l.resolve(ev.Data)
			if err != nil {
				r.end(err.Error())
				return
			}
			l.endpoint = endpoint
			close(l.ready)
		case "", "message":
			if len(bytes.TrimSpace(ev.Data)) > 0 {
				r.deliver(ev.Data)
			}
		}
	}
	r.end("the server closed its event stream")
}

// resolve returns the URL the endpoint event names, relative to the
// configured URL. It must have the configured URL's origin: a server
// could otherwise send the messages, and the credential headers that go
// with them, to another host, or downgrade them to plain HTTP.
func (l *legacySSE) resolve(data []byte) (string, error) {
	configured := l.r.c.b.cfg.URL
	base, err := url.Parse(configured)
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(string(bytes.TrimSpace(data)))
	if err != nil {
		return "", fmt.Errorf("the server's endpoint event holds no URL: %w", err)
	}
	u := base.ResolveReference(ref)
	if got, want := mcphttp.Origin(u), mcphttp.Origin(base); got != want {
		return "", fmt.Errorf("the server named %s as the endpoint for messages, another origin than the configured %s; mcpgate sends nothing there, so that no credential goes there: if the server's messages are served elsewhere, configure that server's URL", got, want)
	}
	return u.String(), nil
}

// post sends one message to the endpoint the stream named; what answers
// it comes on the stream.
func (l *legacySSE) post(ctx context.Context, data []byte) error {
	l.init()
	r := l.r
	select {
	case <-l.ready:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.ctx.Done():
		return ErrGone
	}
	resp, err := r.client.DoURL(ctx, l.endpoint, http.MethodPost, data, mcphttp.Session{}, "", nil)
	if err != nil {
		return r.lost(err)
	}
	if resp.StatusCode/100 != 2 {
		err := mcphttp.HTTPError(resp, fmt.Sprintf("backend %q", r.c.b.name))
		resp.Body.Close()
		return errors.New(r.client.Redact(err.Error()))
	}
	mcphttp.Discard(resp)
	return nil
}
