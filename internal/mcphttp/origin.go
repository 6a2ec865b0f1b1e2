package mcphttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Origin returns the origin of u as scheme://host:port, lower case, with
// the scheme's default port left out: two URLs of one server have the
// same origin, and a URL of another host, port or scheme (an https
// server's http address too) has another. It never holds a path, query or
// user.
func Origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host
}

// OriginOf is Origin of a URL string; "(invalid URL)" if it is not one.
func OriginOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return Origin(u)
}

// maxRedirects is how many redirects within the origin a request follows.
const maxRedirects = 10

// RedirectError is the error of a request the server redirected to
// another origin: the client does not follow it, so that neither the
// request nor its headers (credentials among them) nor a client
// certificate reach a server that was not configured.
type RedirectError struct {
	Peer     string // names the server, e.g. `backend "github"`
	From, To string // the origins
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("%s redirected to %s, another origin than %s; mcpgate does not follow a redirect to another origin, so that no credential goes there: if the server moved, configure its new URL", e.Peer, e.To, e.From)
}

// sameOrigin is the CheckRedirect of every client: redirects within the
// origin are followed, up to maxRedirects; others are refused.
func sameOrigin(peer string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		from, to := Origin(via[0].URL), Origin(req.URL)
		if from != to {
			return &RedirectError{Peer: peer, From: from, To: to}
		}
		if len(via) >= maxRedirects {
			return errors.New(peer + " redirected more than 10 times")
		}
		return nil
	}
}
