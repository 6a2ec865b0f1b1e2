package config

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Remote holds the keys of a backend reached over HTTP (url = ...) rather
// than spawned (command = ...).
type Remote struct {
	URL               string            // the server's MCP endpoint, http://, https:// or unix:SOCKET:PATH
	Headers           map[string]string // sent with every request; values may hold ${credential:NAME}
	TLSCAFile         string            // PEM roots instead of the system's
	TLSClientCertFile string            // PEM client certificate, for mTLS
	TLSClientKeyFile  string            // its key
	TLSServerName     string            // name verified instead of the URL's host
	MaxConnections    int               // connections to the server at once; 8 for a remote backend
	DisplayURL        string            // how the URL is shown in logs, D-Bus and status; "": its origin
	RemoteOAuth                         // oauth_*: the gateway's own token; see remote_oauth.go
}

// defaultMaxConnections bounds the connections to one remote server: with
// HTTP/2 one carries every call; with HTTP/1.1 calls beyond it wait.
const defaultMaxConnections = 8

// IsRemote reports whether b is reached over HTTP rather than spawned.
func (b *Backend) IsRemote() bool { return b.URL != "" }

// remoteEqual reports whether two backends have the same remote keys.
func (r *Remote) remoteEqual(o *Remote) bool {
	return r.URL == o.URL && maps.Equal(r.Headers, o.Headers) &&
		r.TLSCAFile == o.TLSCAFile && r.TLSClientCertFile == o.TLSClientCertFile &&
		r.TLSClientKeyFile == o.TLSClientKeyFile && r.TLSServerName == o.TLSServerName &&
		r.MaxConnections == o.MaxConnections && r.DisplayURL == o.DisplayURL && r.remoteOAuthEqual(&o.RemoteOAuth)
}

// processKeys only make sense for a spawned backend; remoteKeys only for a
// remote one.
var (
	processKeys = []string{"command", "args", "env", "cwd", "inherit_env"}
	remoteKeys  = []string{"url", "headers", "tls_ca_file", "tls_client_cert_file", "tls_client_key_file", "tls_server_name", "max_connections", "display_url"}
)

// RemoteKeys returns the backend keys that apply only to a remote
// backend.
func RemoteKeys() []string { return append(slices.Clone(remoteKeys), remoteOAuthKeys...) }

func remoteFields() []field[Backend] {
	return append([]field[Backend]{
		{"url", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.URL, checkBackendURL)
		}},
		{"headers", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.headers(at, v, &b.Headers)
		}},
		{"tls_ca_file", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.TLSCAFile, checkAbsoluteOrEmpty)
		}},
		{"tls_client_cert_file", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.TLSClientCertFile, checkAbsoluteOrEmpty)
		}},
		{"tls_client_key_file", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.TLSClientKeyFile, checkAbsoluteOrEmpty)
		}},
		{"tls_server_name", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.TLSServerName, nil)
		}},
		{"display_url", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.DisplayURL, checkDisplayURL)
		}},
		{"max_connections", func(d *decoder, at keyPath, v any, b *Backend) bool {
			// Over HTTP/1.1 the server's event stream holds one for good.
			return integer(d, at, v, &b.MaxConnections, 2, math.MaxInt32)
		}},
	}, remoteOAuthFields()...)
}

// checkRemote checks that a backend is either spawned or remote, and that
// it uses only the keys of its kind. t is its table.
func (d *decoder) checkRemote(at keyPath, t map[string]any, b *Backend) {
	_, hasCommand := t["command"]
	_, hasURL := t["url"]
	switch {
	case hasCommand && hasURL:
		d.fail(at.child("url"), "a backend has either command (a server mcpgate spawns) or url (a server it reaches over HTTP), not both; remove one")
		return
	case !hasURL:
		if b.Transport == "streamable-http" || b.Transport == "sse" {
			d.fail(at.child("transport"), "transport = %q is for a remote backend (url = ...); a spawned backend speaks stdio: remove transport, or replace command by url", b.Transport)
		}
		for _, k := range RemoteKeys() {
			if _, ok := t[k]; ok {
				d.fail(at.child(k), "%s applies only to a remote backend (url = ...); remove it, or replace command by url", k)
			}
		}
		return
	}
	for _, k := range processKeys {
		if _, ok := t[k]; ok {
			d.fail(at.child(k), "%s applies only to a spawned backend (command = ...); a remote backend at url has no process; remove it", k)
		}
	}
	switch _, set := t["transport"]; {
	case !set:
		b.Transport = "streamable-http"
	case b.Transport == "stdio" || b.Transport == "cli":
		d.fail(at.child("transport"), "transport = %q is for a backend mcpgate runs itself; a remote backend at url speaks \"streamable-http\" (the default) or \"sse\"", b.Transport)
	}
	if b.MaxConnections == 0 {
		b.MaxConnections = defaultMaxConnections
	}
	d.checkRemoteOAuth(at, t, b)
	if !strings.HasPrefix(b.URL, "https://") {
		for _, k := range []string{"tls_ca_file", "tls_client_cert_file", "tls_client_key_file", "tls_server_name"} {
			if v, ok := t[k]; ok && v != "" {
				d.fail(at.child(k), "%s needs an https:// url; %s is plain HTTP", k, b.URL)
			}
		}
	}
	if b.UnixSocket() != "" && b.Transport == "sse" {
		d.fail(at.child("transport"), "transport = \"sse\" is not served on a unix socket by mcpgate; a server on a unix socket speaks \"streamable-http\" (the default): remove transport")
	}
}

// checkAbsoluteOrEmpty accepts an absolute path, or "" for the default.
func checkAbsoluteOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return checkAbsolute(s)
}

func checkBackendURL(s string) string {
	if strings.HasPrefix(s, unixScheme) {
		_, _, err := ParseUnixURL(s)
		if err != nil {
			return err.Error()
		}
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("%q is not an http:// or https:// URL; write the server's MCP endpoint, such as \"https://mcp.example.com/mcp\", or \"unix:/run/NAME/mcp.sock:/mcp\" for a unix socket", s)
	case u.User != nil:
		return "the URL holds a user name or password, which would show wherever the URL does; remove it and send credentials with headers = { Authorization = \"Bearer ${credential:NAME}\" }"
	case u.Fragment != "":
		return fmt.Sprintf("%q has a fragment (#...), which HTTP never sends; remove it", s)
	}
	return ""
}

// checkDisplayURL accepts what url accepts, and no ${credential:...}:
// display_url is shown, never sent. "" is the default: the origin.
func checkDisplayURL(s string) string {
	if s == "" {
		return ""
	}
	if strings.Contains(s, "${credential:") {
		return "display_url is shown in logs, D-Bus and status and is never sent: it cannot hold ${credential:...}; write the URL as it may be shown"
	}
	return checkBackendURL(s)
}

// reservedHeaders are set by the transport itself.
var reservedHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host", "Connection", "Transfer-Encoding",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

func (d *decoder) headers(at keyPath, v any, dst *map[string]string) bool {
	t, ok := v.(map[string]any)
	if !ok {
		d.wrongType(at, v, "a table of strings", `write headers = { Authorization = "Bearer ${credential:NAME}" }`)
		return false
	}
	hs := make(map[string]string, len(t))
	good := true
	for _, k := range slices.Sorted(maps.Keys(t)) {
		kat := at.child(k)
		canon := http.CanonicalHeaderKey(k)
		switch {
		case !headerName.MatchString(k):
			d.fail(kat, "%q is not a valid HTTP header name; use letters, digits and \"-\"", k)
			good = false
		case slices.Contains(reservedHeaders, canon):
			d.fail(kat, "%s is set by the MCP transport itself; remove it", canon)
			good = false
		default:
			var s string
			if d.str(kat, t[k], &s, checkHeaderValue) {
				hs[canon] = s
			} else {
				good = false
			}
		}
	}
	if good {
		*dst = hs
	}
	return good
}

func checkHeaderValue(s string) string {
	if strings.ContainsAny(s, "\r\n\x00") {
		return "a header value cannot hold a line break or NUL"
	}
	return checkCredentialRefs(s)
}
