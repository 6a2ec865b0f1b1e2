package gateway

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// URL-mode elicitation (MCP 2025-11-25): a server asks the client to send
// its user to a URL (an elicitation/create with mode "url", or the error
// -32042 listing such elicitations), and says when the user is done with
// notifications/elicitation/complete. The gateway passes the request, the
// error and the URL through unchanged and logs nothing of them; it asks
// only a client that declared elicitation.url, and sends the completion
// only to the session the elicitation went to, never to every session.

// CodeURLElicitationRequired is the error of a request that needs the
// user to complete URL-mode elicitations first (data.elicitations).
const CodeURLElicitationRequired = -32042

// maxURLElicitations bounds the URL elicitations a session remembers for
// their completion notices; the oldest is forgotten first.
const maxURLElicitations = 64

// elicitationMode returns the mode of an elicitation/create's params:
// "url" or "form" (the default).
func elicitationMode(params json.RawMessage) string {
	if v, _, ok := jsonrpc.Lookup(params, "mode"); ok {
		if mode, _ := jsonrpc.StringValue(v); mode == "url" {
			return "url"
		}
	}
	return "form"
}

// elicitationAllowed reports whether a client that declared the
// elicitation capability caps (nil: none) may be sent an elicitation in
// mode: "url" needs elicitation.url; "form" needs elicitation.form, or
// neither member (an empty elicitation, as clients before 2025-11-25
// declare it, is form).
func elicitationAllowed(caps json.RawMessage, mode string) bool {
	if caps == nil {
		return false
	}
	var have [2]json.RawMessage
	if jsonrpc.FindEach(caps, []string{"form", "url"}, have[:]) != nil {
		return false
	}
	if mode == "url" {
		return have[1] != nil
	}
	return have[0] != nil || have[1] == nil
}

// mayAsk reports whether the session's client declared what a backend's
// request method with params needs.
func (s *Session) mayAsk(method string, params json.RawMessage) bool {
	if method == "elicitation/create" {
		return elicitationAllowed(s.caps.Elicitation, elicitationMode(params))
	}
	return s.hasCapability(method)
}

// hasFor is clientCaps.has for a request with params.
func (c clientCaps) hasFor(method string, params json.RawMessage) bool {
	if method == "elicitation/create" {
		return elicitationAllowed(c.Elicitation, elicitationMode(params))
	}
	return c.has(method)
}

// urlElicitations are the URL elicitations of a session's backends that
// went to its client, for their completion notices.
type urlElicitations struct {
	keys  map[string]bool
	order []string // oldest first
}

// urlKey names an elicitation of a backend: its elicitationId is the
// backend's, and another backend may use the same.
func urlKey(backendName string, id json.RawMessage) string {
	return backendName + "\x00" + string(id)
}

// rememberURL records that the URL elicitation with the (raw JSON)
// elicitationId id of backendName went to the session's client.
func (s *Session) rememberURL(backendName string, id json.RawMessage) {
	if len(id) == 0 {
		return
	}
	k := urlKey(backendName, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.urls == nil {
		s.urls = &urlElicitations{}
	}
	u := s.urls
	if u.keys[k] {
		return
	}
	if len(u.order) >= maxURLElicitations {
		delete(u.keys, u.order[0])
		u.order = append(u.order[:0], u.order[1:]...)
	}
	put(&u.keys, k, true)
	u.order = append(u.order, k)
}

// takeURL reports whether the session's client was sent the elicitation
// and forgets it.
func (s *Session) takeURL(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.urls
	if u == nil || !u.keys[k] {
		return false
	}
	delete(u.keys, k)
	for i, o := range u.order {
		if o == k {
			u.order = append(u.order[:i], u.order[i+1:]...)
			break
		}
	}
	return true
}

// rememberRelayedURL records a URL-mode elicitation/create that goes to
// the session's client.
func (s *Session) rememberRelayedURL(backendName, method string, params json.RawMessage) {
	if method != "elicitation/create" || elicitationMode(params) != "url" {
		return
	}
	if id, _, ok := jsonrpc.Lookup(params, "elicitationId"); ok {
		s.rememberURL(backendName, id)
	}
}

// rememberRequiredURLs records the elicitations an error -32042 that goes
// to the session's client lists.
func (s *Session) rememberRequiredURLs(backendName string, errObj json.RawMessage) {
	for _, e := range requiredURLs(errObj) {
		if id, _, ok := jsonrpc.Lookup(e, "elicitationId"); ok {
			s.rememberURL(backendName, id)
		}
	}
}

// requiredURLs returns the elicitations of an error object with the code
// -32042, nil for any other error.
func requiredURLs(errObj json.RawMessage) []json.RawMessage {
	code, _, ok := jsonrpc.Lookup(errObj, "code")
	if !ok || string(code) != "-32042" {
		return nil
	}
	list, _, ok := jsonrpc.LookupPath(errObj, "data", "elicitations")
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(list, &items) != nil {
		return nil
	}
	return items
}

// elicitationComplete passes a backend's notifications/elicitation/complete
// to the one session whose client was sent that elicitation; one nobody
// was sent is dropped.
func (g *Gateway) elicitationComplete(b *backend.Backend, msg *jsonrpc.Message) {
	id, _, ok := jsonrpc.Lookup(msg.Params, "elicitationId")
	if !ok {
		return
	}
	k := urlKey(b.Name(), id)
	data := jsonrpc.AppendNotification(nil, msg.Method, msg.Params)
	done := false
	g.eachSession(func(s *Session) {
		if !done && s.takeURL(k) {
			done = true
			s.standalone.push(data, false)
		}
	})
	if !done {
		g.log.Debug("dropped a notice of a URL elicitation completed that no session was sent", "backend", b.Name())
	}
}
