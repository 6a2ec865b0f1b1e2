package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// listener is a modern connection's subscriptions/listen request: the
// list changes its server announces and the resources the gateway's
// clients subscribed to, which 2026-07-28 has in place of
// resources/subscribe and the GET stream.
type listener struct {
	mu    sync.Mutex
	uris  []string      // resources subscribed to, sorted
	open  *Call         // the request in flight, nil if none
	acked chan struct{} // closed when the server acknowledged open
	ended chan struct{} // closed when open got its answer or failed
}

// awaitAcknowledged waits until the server acknowledged the open
// subscription, refused it, ctx ends or health_timeout (at least a
// second) passed; without one it returns at once.
func (c *Conn) awaitAcknowledged(ctx context.Context) {
	l := &c.listen
	l.mu.Lock()
	acked, ended := l.acked, l.ended
	l.mu.Unlock()
	if acked == nil || ended == nil {
		return
	}
	timer := time.NewTimer(max(c.b.cfg.HealthTimeout, time.Second))
	defer timer.Stop()
	select {
	case <-acked:
	case <-ended:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// acknowledged takes notifications/subscriptions/acknowledged: the open
// request, whose id its _meta names, now delivers what it asked for.
func (c *Conn) acknowledged(params json.RawMessage) {
	raw, _, _ := jsonrpc.LookupPath(params, "_meta", "io.modelcontextprotocol/subscriptionId")
	l := &c.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open != nil && string(raw) == string(jsonrpc.IntID(l.open.ID)) && l.acked != nil {
		close(l.acked)
		l.acked = nil
	}
}

// subscribe opens subscriptions/listen for the list changes the server
// announces and the resources subscribed to, so that its lists are
// refreshed as a legacy server's list_changed makes them. The request
// stays pending while the connection lives; it is not a call in flight
// (idle_stop ignores it). When the server ends it or a remote stream drops
// while the connection lives, it is opened again after
// restart_backoff_initial, doubling up to restart_backoff_max while that
// keeps happening, and every list is read again: changes may have been
// missed meanwhile. A server that refuses it has its lists refreshed at
// catalog_refresh only.
func (c *Conn) subscribe() { c.subscribeWith(0) }

// subscribeWith (re)opens the subscription with the current filter,
// ending the one open; backoff is the wait before this attempt.
func (c *Conn) subscribeWith(backoff time.Duration) {
	l := &c.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open != nil {
		c.Abandon(l.open, "the subscriptions changed") // stdio: notifications/cancelled; HTTP: its stream closes
		l.open = nil
		c.listenID.Store(0)
	}
	filter := c.listenFilter()
	if filter == nil {
		return
	}
	params := append([]byte(`{"notifications":{`), filter...)
	params = append(params, "}}"...)
	opened := time.Now()
	var me *Call
	ended := make(chan struct{})
	call, err := c.Go(context.Background(), "subscriptions/listen", params, nil, func(m *jsonrpc.Message, err error) {
		close(ended)
		l.mu.Lock()
		current := l.open == me
		if current {
			l.open = nil
			c.listenID.Store(0)
		}
		l.mu.Unlock()
		switch {
		case !current:
			return // replaced meanwhile
		case err != nil:
			c.log.Debug("the subscription to list changes ended", "err", err)
		case m.Error != nil:
			c.log.Info(fmt.Sprintf("backend %q refused subscriptions/listen; its lists are refreshed only at catalog_refresh", c.b.name), "error", truncate(m.Error, 200))
			return
		default:
			c.log.Debug("the server ended the subscription to list changes")
		}
		if c.ended() {
			return
		}
		next := max(backoff*2, c.b.cfg.RestartBackoffInitial, 10*time.Millisecond)
		if time.Since(opened) > c.b.cfg.RestartBackoffMax {
			next = max(c.b.cfg.RestartBackoffInitial, 10*time.Millisecond) // it lasted: start over
		}
		next = min(next, max(c.b.cfg.RestartBackoffMax, 10*time.Millisecond))
		time.AfterFunc(next, func() {
			if !c.ended() {
				c.lists.refreshAll()
				c.subscribeWith(next)
			}
		})
	})
	if err != nil {
		c.log.Info(fmt.Sprintf("backend %q: could not subscribe to list changes: %v", c.b.name, err))
		return
	}
	me, l.open, l.acked, l.ended = call, call, make(chan struct{}), ended
	c.listenID.Store(call.ID)
}

// listenFilter is the notifications member of subscriptions/listen, or
// nil when there is nothing to listen for. It runs under listen.mu.
func (c *Conn) listenFilter() []byte {
	caps := c.Server().Capabilities
	var filter []byte
	add := func(key string, value []byte) {
		if len(filter) > 0 {
			filter = append(filter, ',')
		}
		filter = append(filter, `"`+key+`":`...)
		filter = append(filter, value...)
	}
	if caps.Tools != nil && caps.Tools.ListChanged {
		add("toolsListChanged", []byte("true"))
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		add("promptsListChanged", []byte("true"))
	}
	if caps.Resources != nil && caps.Resources.ListChanged {
		add("resourcesListChanged", []byte("true"))
	}
	if len(c.listen.uris) > 0 {
		list := []byte{'['}
		for i, u := range c.listen.uris {
			if i > 0 {
				list = append(list, ',')
			}
			list = jsonrpc.AppendString(list, u)
		}
		add("resourceSubscriptions", append(list, ']'))
	}
	return filter
}

// resourceSubscription answers resources/subscribe and
// resources/unsubscribe for a modern server, which has neither: the URI
// joins or leaves the resourceSubscriptions of the connection's
// subscriptions/listen, opened again with the new filter, and its
// notifications/resources/updated come on that stream. The answer is
// delivered on a goroutine of its own, as Go promises, once the server
// acknowledged the new request (an error if it does not within the
// backend's timeout).
func (c *Conn) resourceSubscription(method string, params json.RawMessage, owner any, deliver func(*jsonrpc.Message, error)) *Call {
	call := &Call{ID: c.nextID.Add(1), Method: method, Owner: owner, deliver: deliver}
	answer := &jsonrpc.Message{ID: jsonrpc.IntID(call.ID), Result: json.RawMessage(`{}`)}
	raw, _, _ := jsonrpc.Lookup(params, "uri")
	uri, ok := jsonrpc.StringValue(raw)
	caps := c.Server().Capabilities
	switch {
	case !ok:
		answer = &jsonrpc.Message{ID: answer.ID, Error: errorObject(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params.uri must be a string"))}
	case method == "resources/subscribe" && (caps.Resources == nil || !caps.Resources.Subscribe):
		answer = &jsonrpc.Message{ID: answer.ID, Error: errorObject(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "backend %q offers no resource subscriptions", c.b.name))}
	default:
		l := &c.listen
		l.mu.Lock()
		i, found := slices.BinarySearch(l.uris, uri)
		changed := false
		switch {
		case method == "resources/subscribe" && !found:
			l.uris, changed = slices.Insert(l.uris, i, uri), true
		case method == "resources/unsubscribe" && found:
			l.uris, changed = slices.Delete(l.uris, i, i+1), true
		}
		l.mu.Unlock()
		if changed {
			c.subscribeWith(0)
			l.mu.Lock()
			acked := l.acked
			l.mu.Unlock()
			if acked != nil {
				go func() {
					timer := time.NewTimer(c.b.cfg.Timeout)
					defer timer.Stop()
					select {
					case <-acked:
					case <-timer.C:
						answer = &jsonrpc.Message{ID: answer.ID, Error: errorObject(jsonrpc.Errorf(jsonrpc.CodeInternalError, "backend %q did not acknowledge subscriptions/listen within %s (timeout)", c.b.name, c.b.cfg.Timeout))}
					case <-c.done:
						answer = &jsonrpc.Message{ID: answer.ID, Error: errorObject(jsonrpc.Errorf(jsonrpc.CodeInternalError, "backend %q is gone", c.b.name))}
					}
					deliver(answer, nil)
				}()
				return call
			}
		}
	}
	go deliver(answer, nil)
	return call
}

// errorObject is e as a JSON-RPC error object.
func errorObject(e *jsonrpc.Error) json.RawMessage {
	obj, _, _ := jsonrpc.Lookup(jsonrpc.AppendError(nil, json.RawMessage("0"), e), "error")
	return obj
}
