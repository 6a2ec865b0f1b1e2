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
		if err != nil {
			break
		}
		switch ev.Type {
		case "endpoint":
			u, err := url.Parse(r.c.b.cfg.URL)
			ref, err2 := url.Parse(string(bytes.TrimSpace(ev.Data)))
			if err != nil || err2 != nil || l.endpoint != "" {
				continue
			}
			l.endpoint = u.ResolveReference(ref).String()
			close(l.ready)
		case "", "message":
			if len(bytes.TrimSpace(ev.Data)) > 0 {
				r.deliver(ev.Data)
			}
		}
	}
	r.end("the server closed its event stream")
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
