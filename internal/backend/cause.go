package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
)

// Clients learn why a backend failed only from a fixed vocabulary: the
// state and a short cause such as "exited with status 1", "killed by
// signal SIGKILL", "handshake timed out" or "HTTP 503". A server's own
// words (its stderr, its error messages, a remote server's error body)
// can hold anything, secrets included, and reach only the journal and
// Status.LastError, which D-Bus shows to journal readers alone.

// errHandshakeTimeout is a handshake that got no answer within timeout.
var errHandshakeTimeout = errors.New("no answer to the handshake")

// Cause returns the short cause of err for clients: never text a server
// wrote. An error Cause does not know is "failed".
func Cause(err error) string {
	var public *publicError
	var status *mcphttp.StatusError
	var unreachable *mcphttp.UnreachableError
	var redirect *mcphttp.RedirectError
	var exchange *exchangeError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &public):
		return public.cause
	case errors.As(err, &exchange):
		return "the authorization server did not exchange the caller's access token for one for this backend (oauth_token_exchange; the journal says why)"
	case errors.As(err, new(*ForeignTokenError)):
		return "the caller's token is of another authorization server than the one this backend exchanges tokens at (oauth_issuer)"
	case errors.As(err, new(*NoOAuthTokenError)):
		return "the caller has no OAuth access token to exchange (oauth_token_exchange)"
	case errors.Is(err, errHandshakeTimeout):
		return "handshake timed out"
	case errors.As(err, &status):
		return "HTTP " + strconv.Itoa(status.Code)
	case errors.As(err, &unreachable):
		return "unreachable"
	case errors.As(err, &redirect):
		return "redirected to another origin (refused)"
	case errors.Is(err, ErrTooLarge):
		return "message too large (max_message_bytes)"
	case errors.Is(err, ErrGone):
		return "gone"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	return "failed"
}

// publicError is an error whose text clients may read, wrapping the
// detail (for errors.Is and As) that they may not.
type publicError struct {
	msg, cause string
	detail     error
}

func (e *publicError) Error() string { return e.msg }
func (e *publicError) Unwrap() error { return e.detail }

// public returns err with the text `backend "NAME": CAUSE` for clients.
func (b *Backend) public(err error) error {
	if err == nil {
		return nil
	}
	cause := Cause(err)
	return &publicError{msg: fmt.Sprintf("backend %q: %s", b.name, cause), cause: cause, detail: err}
}
