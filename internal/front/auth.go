package front

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// callerCtx is a request's context with the caller identify found: one
// allocation, as context.WithValue would be, for both its values.
type callerCtx struct {
	context.Context
	caller access.Caller
}

type callerKey struct{}

func (c *callerCtx) Value(key any) any {
	switch key {
	case callerKey{}:
		return c
	case access.CallerKey{}: // for the gateway: see access.CallerOf
		return &c.caller
	}
	return c.Context.Value(key)
}

// identify establishes who sent r: the client of its token or of its
// connection's peer credentials. A caller that is not let in gets its
// answer here (401 or 403), after a delay if it keeps failing, and
// identify returns nil.
func (h *Handler) identify(w http.ResponseWriter, r *http.Request) *http.Request {
	if h.opts.Clients == nil {
		return r // clientOf answers anonymous: no copy of the request per call
	}
	set := h.opts.Clients()
	var peer access.Peer // auth = "none" needs none, and refuses no one
	if set.Required() {
		peer = access.PeerFrom(r.Context())
	}
	c, refusal := set.Identify(r, peer)
	if refusal == nil {
		if c.Client.Name == config.AnonymousClient {
			// The name is reserved for the client every caller is
			// without auth; clientOf answers one just like it.
			return r
		}
		return r.WithContext(&callerCtx{r.Context(), c})
	}
	if h.opts.Refusals != nil {
		access.Wait(r.Context(), h.opts.Refusals.Refused(peer, refusal, r.Method, r.URL.Path))
	}
	if refusal.Challenge != "" {
		w.Header().Set("WWW-Authenticate", refusal.Challenge)
	} else if refusal.Status == http.StatusUnauthorized {
		// As the MCP authorization specification asks of a protected
		// resource; the realm names what the token is for.
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpgate"`)
	}
	h.rpcError(w, refusal.Status, nil, jsonrpc.CodeInvalidRequest, "%s: %s", refusal.Reason, refusal.Advice)
	return nil
}

// clientOf returns the client identify attached to r.
func clientOf(r *http.Request) *access.Client {
	if c, ok := r.Context().Value(callerKey{}).(*callerCtx); ok {
		return c.caller.Client
	}
	return anonymous
}

// identityOf returns the identity identify found for r (see
// access.Caller): "" for every caller when auth is "none".
func identityOf(r *http.Request) string {
	if c, ok := r.Context().Value(callerKey{}).(*callerCtx); ok {
		return c.caller.Identity
	}
	return ""
}

// anonymous is the client of a request when the gateway knows no clients.
// A Client and its Policy are never changed once made, so one serves all
// requests instead of two allocations per call.
var anonymous = access.Anonymous()

// limited answers 429 with Retry-After when the request's client exceeded
// its rate_limit, and reports whether it did.
func (h *Handler) limited(w http.ResponseWriter, r *http.Request) bool {
	c := clientOf(r)
	if c.Limit == nil {
		return false
	}
	ok, wait := c.Limit.Take(time.Now())
	if ok {
		return false
	}
	h.limitError(w, &access.LimitError{Client: c.Name, What: "rate_limit", Limit: c.Limit.String(), RetryAfter: wait}, nil)
	return true
}

// limitError answers a request refused by a client limit, if err is one,
// and reports whether it was.
func (h *Handler) limitError(w http.ResponseWriter, err error, id []byte) bool {
	var le *access.LimitError
	if !errors.As(err, &le) {
		return false
	}
	secs := int((le.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	h.rpcError(w, http.StatusTooManyRequests, id, jsonrpc.CodeInvalidRequest, "%s", le.Error())
	return true
}

// owns reports whether the request's caller may use sess: a session
// belongs to the identity that created it, as the client it was then.
// Two users a configuration maps to one client are two identities.
func owns(r *http.Request, sess *gateway.Session) bool {
	return sess.Client().Name == clientOf(r).Name && sess.Identity() == identityOf(r)
}
