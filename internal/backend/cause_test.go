package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
)

// TestCause: whatever an error quotes, its cause is a phrase of the fixed
// vocabulary, and a public error's text is only the backend and the cause
// while errors.Is still sees what it wraps.
func TestCause(t *testing.T) {
	const secret = "token=s3cr3t"
	status := &mcphttp.StatusError{Code: 503, Err: errors.New("peer answered HTTP 503: " + secret)}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("handshake: %w", status), "HTTP 503"},
		{&mcphttp.UnreachableError{Err: errors.New("dial tcp: " + secret)}, "unreachable"},
		{fmt.Errorf("%w within 1m0s (timeout)", errHandshakeTimeout), "handshake timed out"},
		{fmt.Errorf("backend %q: %w: %s", "x", ErrGone, secret), "gone"},
		{fmt.Errorf("initialize: %w", context.DeadlineExceeded), "timed out"},
		{errors.New("server said: " + secret), "failed"},
	} {
		if got := Cause(tc.err); got != tc.want {
			t.Errorf("Cause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	b := &Backend{name: "r"}
	err := b.public(fmt.Errorf("call: %w", status))
	if err.Error() != `backend "r": HTTP 503` || strings.Contains(err.Error(), secret) {
		t.Errorf("public error %q, want only the backend and the cause", err)
	}
	var se *mcphttp.StatusError
	if !errors.As(err, &se) || se.Code != 503 {
		t.Errorf("the public error hides what it wraps from errors.As: %v", err)
	}
	if Cause(fmt.Errorf("relay: %w", err)) != "HTTP 503" {
		t.Errorf("Cause of a wrapped public error = %q", Cause(fmt.Errorf("relay: %w", err)))
	}
}
