package mcphttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// ErrNoStream is returned by Listen when the server offers no standalone
// event stream (HTTP 405): server-initiated messages then come only with
// responses.
var ErrNoStream = errors.New("the server offers no standalone event stream")

// ListenOptions configure Listen.
type ListenOptions struct {
	// Deliver receives the data of every message event, in order.
	Deliver func([]byte)
	// TooLarge, if set, learns of every event dropped for holding more
	// than Options.MaxMessageBytes; the stream goes on with the next one.
	TooLarge func(*EventTooLargeError)
	Logger   *slog.Logger
	// RetryMin and RetryMax bound the delay between attempts to re-open
	// the stream (defaults 1s and 30s); the server's retry field sets
	// the base.
	RetryMin, RetryMax time.Duration
	// GiveUp, if set, is asked after each failed attempt whether to stop
	// trying; Listen then returns that attempt's error.
	GiveUp func(err error, failures int) bool
}

// Listen keeps the session's standalone event stream (a GET) open until
// ctx ends, re-opening it with Last-Event-ID when it drops so that
// nothing sent meanwhile is lost, with a growing delay while it fails, and
// following the session when it is renewed. It returns nil when ctx
// ended, ErrNoStream, or the error GiveUp stopped at.
func (c *Client) Listen(ctx context.Context, o ListenOptions) error {
	if o.RetryMin <= 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var lastID string
	gen := c.Session().Gen
	retry := o.RetryMin
	failures := 0
	for ctx.Err() == nil {
		sess := c.Session()
		if sess.Gen != gen {
			lastID, gen = "", sess.Gen
		}
		var failed error
		resp, err := c.Do(ctx, http.MethodGet, nil, sess, lastID, nil)
		switch {
		case err != nil:
			failed = err
		case resp.StatusCode == http.StatusMethodNotAllowed:
			Discard(resp)
			return ErrNoStream
		case resp.StatusCode == http.StatusNotFound && sess.ID != "":
			Discard(resp)
			if err := c.Renew(ctx, sess.Gen); err != nil {
				if ctx.Err() == nil {
					o.Logger.Warn("cannot re-open the event stream", "err", err)
				}
				failed = err
			} else {
				failures = 0
				continue
			}
		case resp.StatusCode != http.StatusOK:
			failed = c.redact(HTTPError(resp, c.opts.Peer))
			resp.Body.Close()
			o.Logger.Warn(c.opts.Peer+" refused the event stream", "err", failed)
		default:
			es := NewEventReader(resp.Body, c.opts.MaxMessageBytes)
			es.LastID = lastID
			for {
				data, err := es.Message()
				var tooLarge *EventTooLargeError
				if errors.As(err, &tooLarge) {
					if o.TooLarge != nil {
						o.TooLarge(tooLarge)
					} else {
						o.Logger.Warn(c.opts.Peer+" sent an event too large on its event stream; dropped it", "err", err)
					}
					continue
				}
				if err != nil {
					break
				}
				o.Deliver(data)
			}
			resp.Body.Close()
			lastID = es.LastID
			if es.Retry > 0 {
				retry = es.Retry
			}
			failures = 0
		}
		if failed != nil {
			failures++
			if ctx.Err() == nil && o.GiveUp != nil && o.GiveUp(failed, failures) {
				return failed
			}
		}
		delay := min(retry<<min(failures, 5), o.RetryMax)
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil
		}
	}
	return nil
}
