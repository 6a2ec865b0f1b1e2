package mcphttp

import (
	"errors"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// minSecret is the shortest secret that is redacted: shorter values would
// blank out ordinary words.
const minSecret = 4

// Redact replaces every secret of the client (Options.Secrets) in s by
// "[redacted]".
func (c *Client) Redact(s string) string {
	for _, v := range c.opts.Secrets {
		if len(v) >= minSecret {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// redact returns err with every secret removed from what it says: a
// server that echoes the token it was sent must not put it into our logs.
func (c *Client) redact(err error) error {
	if err == nil || len(c.opts.Secrets) == 0 {
		return err
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		je.Message = c.Redact(je.Message)
		if c.Redact(string(je.Data)) != string(je.Data) {
			je.Data = nil
		}
	}
	s := err.Error()
	if r := c.Redact(s); r != s {
		return &redactedError{msg: r, err: err}
	}
	return err
}

// redactedError says what its error says, without the secrets; Unwrap
// keeps the kind (unreachable, HTTP status) for callers that act on it.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
