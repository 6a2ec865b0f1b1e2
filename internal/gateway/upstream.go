package gateway

import (
	"context"
	"sync"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
)

// Who a client's calls run as upstream: the gateway hands each call it
// sends a backend that exchanges tokens (oauth_token_exchange) the caller
// it is for (a backend.Caller, in the call's context), so that the
// backend can act as that caller. The caller's OAuth access token is the
// one the front's identification accepted for the latest request of the
// session (or the stateless request), kept in memory only. A call to
// another backend costs nothing of this; a request with an OAuth token
// costs one small allocation per session (per stateless request), one
// without costs none.

// upstreamCaller is the caller a session's calls are sent for.
type upstreamCaller struct {
	mu     sync.Mutex
	caller access.Caller   // of the latest request; zero without auth
	made   *backend.Caller // made from it by caller, once
}

// noteCaller records the caller the front identified for the request of
// ctx (access.CallerOf) as the one the session's calls are sent for. A
// session belongs to one identity, so only its token changes, when the
// client renews it.
func (s *Session) noteCaller(ctx context.Context) {
	c, ok := access.CallerOf(ctx)
	u := s.upstream.Load()
	if !ok || c.AccessToken.IsZero() && u == nil {
		// Without auth, or without an OAuth token: the caller is the
		// session's identity, with no token (see caller); nothing to
		// keep, no allocation.
		return
	}
	if u == nil {
		s.upstream.CompareAndSwap(nil, &upstreamCaller{})
		u = s.upstream.Load()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.caller.AccessToken == c.AccessToken && u.caller.Identity == c.Identity {
		return
	}
	u.caller, u.made = *c, nil
}

// caller returns who the session's calls are sent for.
func (s *Session) caller() *backend.Caller {
	u := s.upstream.Load()
	if u == nil {
		s.upstream.CompareAndSwap(nil, &upstreamCaller{})
		u = s.upstream.Load()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.made == nil {
		identity := u.caller.Identity
		if u.caller.Client == nil {
			identity = s.identity
		}
		u.made = &backend.Caller{Identity: identity, Subject: u.caller.Subject, Issuer: u.caller.Issuer, Token: backend.NewSecret(u.caller.AccessToken.Reveal())}
	}
	return u.made
}

// upstreamOf names who a call of the session to the backend named name
// runs as upstream, for its audit entry (see backend.Backend.UpstreamOf).
func (s *Session) upstreamOf(name string) (as, subject string) {
	b := s.g.registry.Backend(name)
	switch {
	case b == nil:
		return "", ""
	case b.Config().OAuthTokenExchange:
		return b.UpstreamOf(s.caller())
	}
	return b.UpstreamOf(nil)
}
