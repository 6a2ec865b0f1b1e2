package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Under socket activation the first client connects before any backend
// has finished its first handshake: it started the daemon. Clients that
// list once would see an empty catalog, and a call to a backend's tool
// would find no such tool. So a session's first list of each kind waits,
// at most first_list_wait counted from each backend's first start, for
// the backends still in their first handshake, and a call to a tool under
// the tool_prefix of such a backend waits for its handshake, at most its
// start_wait. A backend that takes longer joins later with list_changed,
// as ever; backends that are up (or failed) hold nothing back. Neither
// wait blocks the caller: it runs on a goroutine of its own, counted as a
// request in flight, and ends when the client goes away.

// listKind numbers the list methods for Session.listed; 0 for others.
func listKind(method string) uint32 {
	switch method {
	case "tools/list":
		return 1
	case "prompts/list":
		return 2
	case "resources/list":
		return 4
	case "resources/templates/list":
		return 8
	}
	return 0
}

// firstList reports whether msg is the session's first list of its kind,
// without a cursor, and marks it listed.
func (s *Session) firstList(msg *jsonrpc.Message) bool {
	bit := listKind(msg.Method)
	if bit == 0 || s.listed.Or(bit)&bit != 0 {
		return false
	}
	_, _, hasCursor := jsonrpc.Lookup(msg.Params, "cursor")
	return !hasCursor
}

// startingFor returns the backends whose first start attempt is still
// undecided, of those match accepts, with the latest time it is worth
// waiting for each: the soonest is first.
func (g *Gateway) startingFor(now time.Time, bound func(*backend.Backend) time.Time, match func(*backend.Backend) bool) (pending []*backend.Backend, until []time.Time) {
	for _, b := range g.registry.Backends() {
		select {
		case <-b.Settled():
			continue
		default:
		}
		if match != nil && !match(b) {
			continue
		}
		if deadline := bound(b); deadline.After(now) {
			pending, until = append(pending, b), append(until, deadline)
		}
	}
	return pending, until
}

// firstListBound is how long a first list waits for b: first_list_wait
// from its first start.
func (g *Gateway) firstListBound(now time.Time) func(*backend.Backend) time.Time {
	wait := g.opts.FirstListWait
	return func(b *backend.Backend) time.Time {
		began := b.Began()
		if began.IsZero() {
			began = now
		}
		return began.Add(wait)
	}
}

// awaitSettled waits until each backend of pending settled or its time in
// until passed, or ctx ended.
func awaitSettled(ctx context.Context, pending []*backend.Backend, until []time.Time) {
	for i, b := range pending {
		d := time.Until(until[i])
		if d <= 0 {
			continue
		}
		t := time.NewTimer(d)
		select {
		case <-b.Settled():
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// later handles msg again once the backends of pending settled or their
// time passed, on a goroutine of its own: the wait counts as a request in
// flight (for Drain) and ends when the client abandons the stream. The
// request is handled as usual then, without waiting again.
func (s *Session) later(msg *jsonrpc.Message, stream *Stream, pending []*backend.Backend, until []time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	stream.onAbandon(cancel)
	s.g.inflight.Add(1)
	go func() {
		defer s.g.callEnded()
		defer cancel()
		awaitSettled(ctx, pending, until)
		if ctx.Err() != nil {
			// Its stream is gone: the answer ends it, as a call's that
			// was waiting for its backend does.
			stream.push(errorResponse(msg.ID, CodeBackendUnavailable, "the client went away while %s waited for backends in their first handshake", msg.Method), true)
			return
		}
		s.handle(msg, stream, true)
	}()
}

// awaitFirstList defers msg, a session's first list of its kind, while
// backends are in their first handshake (see startingFor), and reports
// whether it did.
func (s *Session) awaitFirstList(msg *jsonrpc.Message, stream *Stream) bool {
	if s.g.opts.FirstListWait <= 0 || !s.firstList(msg) {
		return false
	}
	now := time.Now()
	pending, until := s.g.startingFor(now, s.g.firstListBound(now), nil)
	if len(pending) == 0 {
		return false
	}
	s.later(msg, stream, pending, until)
	return true
}

// awaitStartingTool defers a tools/call of name, a tool the catalog does
// not have, while a backend whose tool_prefix the name has is in its
// first handshake: at most that backend's start_wait, as a call waits for
// a backend that restarts. It reports whether it did.
func (s *Session) awaitStartingTool(msg *jsonrpc.Message, stream *Stream, name string) bool {
	if !s.policy().Allows(access.Tools, name) {
		return false // it could not call the tool anyway: no wait to probe with
	}
	now := time.Now()
	pending, until := s.g.startingFor(now,
		func(b *backend.Backend) time.Time { return now.Add(b.Config().StartWait) },
		func(b *backend.Backend) bool { return ownsName(b, name) })
	if len(pending) == 0 {
		return false
	}
	s.later(msg, stream, pending, until)
	return true
}

// ownsName reports whether name can be a tool of b: it has b's
// tool_prefix (any name can be a tool of a backend without one).
func ownsName(b *backend.Backend, name string) bool {
	p := b.Config().ToolPrefix
	return !b.IsCLI() && strings.HasPrefix(name, p) && len(name) > len(p)
}

// stillStarting returns the error for a call of name, a tool the catalog
// does not have, while a backend that may own it is still in its first
// handshake (its start_wait passed): the backend, not the tool, is
// missing. It returns nil when no such backend is starting.
func (s *Session) stillStarting(name string) error {
	pending, _ := s.g.startingFor(time.Time{}, func(*backend.Backend) time.Time { return time.Unix(1<<40, 0) },
		func(b *backend.Backend) bool { return ownsName(b, name) })
	if len(pending) == 0 || !s.policy().Allows(access.Tools, name) {
		return nil
	}
	b := pending[0]
	return &jsonrpc.Error{Code: CodeBackendUnavailable, Message: fmt.Sprintf(
		"backend %q, whose tools are named %q…, is still in its first handshake after start_wait (%s): its tools are not known yet; try again later",
		b.Name(), b.Config().ToolPrefix, b.Config().StartWait)}
}
