package gateway

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/access"
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
	subscribe := msg.Method == "resources/subscribe"
	s.mu.Lock()
	owner, had := s.subs[uri]
	s.mu.Unlock()
	if subscribe {
		if had {
			stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
			return
		}
		var ok bool
		if owner, ok = s.g.resourceOwner(cat, uri); !ok || !s.policy().Allows(access.Resources, uri) {
			stream.push(errorResponse(msg.ID, CodeResourceNotFound, "resource not found: no backend serves %q", uri), true)
			return
		}
	} else if !had {
		stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
		return
	}
	g := s.g
	g.subsMu.Lock()
	k := subKey{owner, uri}
	// A session's own instance hears of each of its subscriptions.
	pooled := g.pooled(owner)
	first := subscribe && (g.subs[k] == 0 || pooled)
	last := !subscribe && (g.subs[k] == 1 || pooled)
	if subscribe {
		g.subs[k]++
	} else if g.subs[k]--; g.subs[k] <= 0 {
		delete(g.subs, k)
	}
	g.subsMu.Unlock()
	s.mu.Lock()
	if subscribe {
		s.subs[uri] = owner
	} else {
		delete(s.subs, uri)
	}
	s.mu.Unlock()
	if first {
		// A backend that refuses the subscription must not stay counted.
		s.forwardThen(msg, stream, owner, msg.Params, func(ok bool, _ int) {
			if !ok {
				s.mu.Lock()
				delete(s.subs, uri)
				s.mu.Unlock()
				g.unsubscribeCount(k)
			}
		})
		return
	}
	if last {
		s.forwardTo(msg, stream, owner, msg.Params)
		return
	}
	stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
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
			params := append(jsonrpc.AppendString([]byte(`{"uri":`), uri), '}')
			conn.Async("resources/unsubscribe", params, b.Config().Timeout, func(*jsonrpc.Message, error) {})
		}
	}
}
