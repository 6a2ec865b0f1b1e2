package gateway

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
)

// callerContext is a request's context as the front makes it for caller.
type callerContext struct {
	context.Context
	caller access.Caller
}

func (c *callerContext) Value(key any) any {
	if key == (access.CallerKey{}) {
		return &c.caller
	}
	return c.Context.Value(key)
}

// TestSessionCaller: a session's calls are sent for the caller of its
// latest request, with the token that request came with; without auth,
// for the session's identity without a token; and a call's context
// answers backend.CallerKey with it.
func TestSessionCaller(t *testing.T) {
	s := &Session{identity: "oauth:corp:sub:alice"}
	if c := s.caller(); c.Identity != "oauth:corp:sub:alice" || !c.Token.IsZero() {
		t.Errorf("before any request: %+v", c)
	}
	alice := access.Caller{Client: &access.Client{Name: "users"}, Identity: "oauth:corp:sub:alice", Subject: "alice"}
	for _, token := range []string{"first", "first", "renewed"} {
		alice.AccessToken = access.NewAccessToken(token)
		s.noteCaller(&callerContext{context.Background(), alice})
		c := s.caller()
		if c.Identity != alice.Identity || c.Subject != "alice" || c.Token.Reveal() != token {
			t.Errorf("after a request with token %q: %+v (token %q)", token, c, c.Token.Reveal())
		}
		if s.caller() != c {
			t.Errorf("a second caller made for the same token")
		}
	}
	// A context without a caller (auth = "none", the gateway's own)
	// changes nothing.
	before := s.caller()
	s.noteCaller(context.Background())
	if s.caller() != before {
		t.Errorf("a request without a caller changed the session's")
	}

	send := &sendContext{caller: before}
	if got, _ := send.Value(backend.CallerKey{}).(*backend.Caller); got != before {
		t.Errorf("the call's context answers %v, want the session's caller", got)
	}
	if (&sendContext{}).Value(backend.CallerKey{}) != nil {
		t.Errorf("a call to a backend that does not exchange tokens carries a caller")
	}
}
