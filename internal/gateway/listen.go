package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// listenFilter is what a subscriptions/listen request opts in to.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listen serves subscriptions/listen, 2026-07-28's replacement for the
// GET stream and resources/subscribe: the request's stream stays open and
// carries, after notifications/subscriptions/acknowledged, the list_changed
// notifications the client opted in to and updates of the resources it
// subscribed to, each tagged with the request's id. A listener counts as
// a session for max_sessions (the gateway's and the client's), and holds
// at most max_subscriptions resources; what is beyond is left out of the
// acknowledgement. It ends when the client closes the stream, or, with a
// result, when the gateway shuts down.
func (s *Session) listen(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog) {
	g := s.g
	fail := func(code int, format string, args ...any) {
		stream.push(errorResponse(msg.ID, code, format, args...), true)
	}
	if !s.stateless {
		fail(jsonrpc.CodeMethodNotFound, "method not found: subscriptions/listen is MCP 2026-07-28's; a session subscribes with resources/subscribe and its GET stream")
		return
	}
	if stream.jsonOnly {
		fail(jsonrpc.CodeInvalidRequest, "subscriptions/listen answers with an event stream: the Accept header must list text/event-stream")
		return
	}
	var p struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Notifications == nil {
		fail(jsonrpc.CodeInvalidParams, "params.notifications must be an object naming the notifications to receive")
		return
	}
	if n := g.nsess.Add(1); g.opts.MaxSessions > 0 && n > int64(g.opts.MaxSessions) {
		g.nsess.Add(-1)
		fail(CodeOverloaded, "the gateway already serves %d sessions and listeners (max_sessions); retry once one ends", g.opts.MaxSessions)
		return
	}
	if err := g.admit(s.Client()); err != nil {
		g.nsess.Add(-1)
		fail(CodeOverloaded, "%v", err)
		return
	}
	want := p.Notifications
	s.init2026Listener(msg.ID, stream, want)
	ack := listenFilter{ToolsListChanged: want.ToolsListChanged, PromptsListChanged: want.PromptsListChanged, ResourcesListChanged: want.ResourcesListChanged}
	for _, uri := range want.ResourceSubscriptions {
		if s.subscribe2026(cat, uri) {
			ack.ResourceSubscriptions = append(ack.ResourceSubscriptions, uri)
		}
	}
	params := []byte(`{"_meta":{"` + MetaSubscriptionID + `":`)
	params = append(append(params, msg.ID...), `},"notifications":`...)
	params = append(params, rawJSON(ack)...)
	stream.push(jsonrpc.AppendNotification(nil, "notifications/subscriptions/acknowledged", append(params, '}')), false)
	g.listeners.Store(s, struct{}{})
}

// init2026Listener makes s, a stateless request's context, the listener
// of subscription id: its standalone stream is the request's.
func (s *Session) init2026Listener(id json.RawMessage, stream *Stream, want *listenFilter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.one.listenID = id
	s.one.listenTag = append(append([]byte(`{"_meta":{"`+MetaSubscriptionID+`":`), id...), "}}"...)
	s.standalone = stream
	s.subs = map[string]string{}
	s.offered = offeredCaps{tools: want.ToolsListChanged, prompts: want.PromptsListChanged, resources: want.ResourcesListChanged}
}

// subscribe2026 subscribes a listener to uri, as resources/subscribe does
// for a session, and reports whether it did: the client may see it, its
// backend is not pooled, and max_subscriptions is not reached.
func (s *Session) subscribe2026(cat *catalog.Catalog, uri string) bool {
	g := s.g
	owner, original, ok := g.backendURI(cat, uri)
	if !ok || !s.view().resource(owner, uri) || g.pooled(owner) {
		return false
	}
	first, _, k, refusal := s.countSubscription(uri, owner, true)
	if refusal != nil {
		return false
	}
	if first {
		b := g.registry.Backend(owner)
		conn := b.Conn()
		if conn == nil {
			s.forgetSubscription(k)
			return false
		}
		params := append(jsonrpc.AppendString([]byte(`{"uri":`), original), '}')
		conn.Async("resources/subscribe", params, b.Config().Timeout, func(m *jsonrpc.Message, err error) {
			if err != nil || m.Error != nil {
				s.forgetSubscription(k)
			}
		})
	}
	return true
}

// eachListener calls fn for every open subscriptions/listen stream.
func (g *Gateway) eachListener(fn func(*Session)) {
	g.listeners.Range(func(k, _ any) bool {
		fn(k.(*Session))
		return true
	})
}

// notification builds a notification for the session: tagged with the
// subscription id on a listener's stream.
func (s *Session) notification(method string, params json.RawMessage) []byte {
	tag := s.listenTag()
	if tag == nil {
		return jsonrpc.AppendNotification(nil, method, params)
	}
	return jsonrpc.AppendNotification(nil, method, tagged(params, tag))
}

// tagged puts the subscription id of tag (`{"_meta":{...}}`) into params,
// spliced: into its _meta if it has one.
func tagged(params, tag json.RawMessage) json.RawMessage {
	if len(params) == 0 {
		return tag
	}
	inner := tag[len(`{"_meta":{`) : len(tag)-2] // "io.modelcontextprotocol/subscriptionId":ID
	if meta, span, ok := jsonrpc.Lookup(params, "_meta"); ok && len(meta) > 1 && meta[0] == '{' {
		sep := ","
		if emptyObject(meta[1:]) {
			sep = ""
		}
		out := append([]byte{}, params[:span.Start+1]...)
		out = append(append(out, inner...), sep...)
		return append(out, params[span.Start+1:]...)
	}
	open := 0
	for open < len(params) && params[open] != '{' {
		open++
	}
	if open == len(params) {
		return params
	}
	sep := ","
	if emptyObject(params[open+1:]) {
		sep = ""
	}
	out := append([]byte{}, params[:open+1]...)
	out = append(append(out, tag[1:len(tag)-1]...), sep...)
	return append(out, params[open+1:]...)
}

// endListener ends a listener gracefully, as 2026-07-28 asks of a server
// that ends a subscription: with a result to subscriptions/listen.
func (s *Session) endListener(why string) {
	if _, ok := s.g.listeners.LoadAndDelete(s); !ok {
		return
	}
	s.g.log.Debug(fmt.Sprintf("ended a subscriptions/listen stream of client %q: %s", s.Client().Name, why), "client", s.Client().Name)
	s.mu.Lock()
	stream, id := s.standalone, s.one.listenID
	s.mu.Unlock()
	stream.push(jsonrpc.AppendResult(nil, id, s.one.listenTag), true)
}

// endListeners ends every listener gracefully: the gateway is shutting
// down, and their clients should listen on another host.
func (g *Gateway) endListeners(why string) {
	g.eachListener(func(s *Session) { s.endListener(why) })
}

// closeListener forgets a listener whose request ended, and gives back
// the session it counted as.
func (s *Session) closeListener() {
	if s.listenTag() == nil {
		return
	}
	s.g.listeners.Delete(s)
	s.g.nsess.Add(-1)
	s.g.release(s.Client().Name)
}
