package gateway

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// subscription handles resources/subscribe and resources/unsubscribe: the
// owning backend is subscribed while at least one session is.
func (s *Session) subscription(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog) {
	uri, _, err := stringParam(msg.Params, "uri")
	if err != nil {
		stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true)
		return
	}
	g := s.g
	subscribe := msg.Method == "resources/subscribe"
	owner := ""
	params := msg.Params
	if subscribe {
		var ok bool
		var original string
		if owner, original, ok = g.backendURI(cat, uri); !ok || !s.view().resource(owner, uri) {
			stream.push(errorResponse(msg.ID, CodeResourceNotFound, "resource not found: no backend serves %q", uri), true)
			return
		}
		params = withBackendURI(params, uri, original)
	} else if _, original, ok := cat.BackendURI(uri); ok {
		params = withBackendURI(params, uri, original)
	}
	first, last, k, refusal := s.countSubscription(uri, owner, subscribe)
	if refusal == nil {
		s.op(msg, stream).SetResource(uri) // one it may read, or had subscribed to
	}
	switch {
	case refusal != nil:
		stream.push(jsonrpc.AppendError(nil, msg.ID, refusal), true)
	case first:
		// A backend that refuses the subscription must not stay counted.
		s.forwardThen(msg, stream, k.backend, params, func(ok bool, _ int) {
			if !ok {
				s.forgetSubscription(k)
			}
		})
	case last:
		s.forwardTo(msg, stream, k.backend, params)
	default:
		stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
	}
}

// countSubscription records that the session subscribed to uri at owner,
// or unsubscribed from it, and reports whether that was the first
// subscription to it at that backend or the last one. Whether the session
// holds the subscription and the count of sessions that do change
// together, so concurrent requests of one session count once.
func (s *Session) countSubscription(uri, owner string, subscribe bool) (first, last bool, k subKey, refusal *jsonrpc.Error) {
	g := s.g
	pooled := owner != "" && g.pooled(owner)
	s.mu.Lock()
	defer s.mu.Unlock()
	had, holds := s.subs[uri]
	switch {
	case s.closed:
		return false, false, k, jsonrpc.Errorf(CodeBackendUnavailable, "the session has ended")
	case subscribe == holds:
		return false, false, k, nil // already (un)subscribed: nothing changes
	case subscribe && g.opts.MaxSubscriptions > 0 && len(s.subs) >= g.opts.MaxSubscriptions:
		return false, false, k, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"this session holds %d subscriptions, the most it may (max_subscriptions); unsubscribe from a resource first", len(s.subs))
	case !subscribe:
		owner = had
		pooled = g.pooled(owner)
	}
	k = subKey{owner, uri}
	g.subsMu.Lock()
	defer g.subsMu.Unlock()
	// A session's own instance hears of each of its subscriptions.
	if subscribe {
		first = g.subs[k] == 0 || pooled
		g.subs[k]++
		put(&s.subs, uri, owner)
		return first, false, k, nil
	}
	last = g.subs[k] == 1 || pooled
	if g.subs[k]--; g.subs[k] <= 0 {
		delete(g.subs, k)
	}
	delete(s.subs, uri)
	return false, last, k, nil
}

// forgetSubscription undoes the session's subscription to k that its
// backend refused, unless the session dropped it meanwhile.
func (s *Session) forgetSubscription(k subKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner, holds := s.subs[k.uri]; !holds || owner != k.backend {
		return
	}
	delete(s.subs, k.uri)
	g := s.g
	g.subsMu.Lock()
	defer g.subsMu.Unlock()
	if g.subs[k]--; g.subs[k] <= 0 {
		delete(g.subs, k)
	}
}

// unsubscribeCount forgets one session's subscription to k and reports
// whether it was the last.
func (g *Gateway) unsubscribeCount(k subKey) (last bool) {
	g.subsMu.Lock()
	defer g.subsMu.Unlock()
	g.subs[k]--
	if g.subs[k] > 0 {
		return false
	}
	delete(g.subs, k)
	return true
}

// resourceOwner returns the backend serving uri: the one that lists it or
// a template matching it, else the only backend with resources at all, as
// servers may serve URIs they do not list.
func (g *Gateway) resourceOwner(cat *catalog.Catalog, uri string) (string, bool) {
	if owner, ok := cat.ResourceOwner(uri); ok {
		return owner, true
	}
	only := ""
	for _, b := range g.registry.Backends() {
		if _, server := b.Catalog(); server != nil && server.Capabilities.Resources != nil {
			if only != "" {
				return "", false
			}
			only = b.Name()
		}
	}
	return only, only != ""
}

// unsubscribe drops one session's subscription when it ends.
func (g *Gateway) unsubscribe(owner, uri string) {
	if !g.unsubscribeCount(subKey{owner, uri}) {
		return
	}
	if b := g.registry.Backend(owner); b != nil {
		if conn := b.Conn(); conn != nil {
			if o, original, ok := g.Catalog().BackendURI(uri); ok && o == owner {
				uri = original
			}
			params := append(jsonrpc.AppendString([]byte(`{"uri":`), uri), '}')
			conn.Async("resources/unsubscribe", params, b.Config().Timeout, func(*jsonrpc.Message, error) {})
		}
	}
}
