package config

import (
	"fmt"
	"strings"
)

// unixScheme starts the url of a remote backend reached on a unix socket,
// as it starts a listen address of the gateway's own.
const unixScheme = "unix:"

// unixHost is the Host of requests sent on a unix socket: the socket, not
// the name, says where they go.
const unixHost = "localhost"

// ParseUnixURL splits a url of the form unix:SOCKET:PATH, such as
// "unix:/run/weather/mcp.sock:/mcp", into the absolute path of the unix
// socket and the HTTP path (with its query, if any) of the MCP endpoint
// on it. The socket's path ends at its first ":", so a socket whose path
// holds one cannot be named. The error says what is wrong and how to
// write it.
func ParseUnixURL(raw string) (socket, path string, err error) {
	rest, ok := strings.CutPrefix(raw, unixScheme)
	if !ok {
		return "", "", fmt.Errorf("%q does not start with %q", raw, unixScheme)
	}
	socket, path, ok = strings.Cut(rest, ":")
	switch {
	case !strings.HasPrefix(socket, "/"):
		return "", "", fmt.Errorf("%q names no absolute socket path; write unix:/PATH/OF/SOCKET:/HTTP/PATH, such as \"unix:/run/weather/mcp.sock:/mcp\"", raw)
	case !ok || !strings.HasPrefix(path, "/"):
		return "", "", fmt.Errorf("%q names no HTTP path after the socket's; write unix:/PATH/OF/SOCKET:/HTTP/PATH, such as \"unix:/run/weather/mcp.sock:/mcp\" (a socket path cannot hold \":\")", raw)
	case strings.ContainsAny(raw, " \t\r\n\x00#"):
		return "", "", fmt.Errorf("%q holds a space, a control character or a fragment (#...); write unix:/PATH/OF/SOCKET:/HTTP/PATH", raw)
	case strings.Contains(socket, "\\"):
		return "", "", fmt.Errorf("%q holds a backslash in its socket path; write the path as it is on disk", raw)
	}
	return socket, path, nil
}

// UnixSocket returns the path of the unix socket a remote backend is
// reached on, "" for one reached over TCP.
func (r *Remote) UnixSocket() string {
	socket, _, err := ParseUnixURL(r.URL)
	if err != nil {
		return ""
	}
	return socket
}

// Endpoint returns the URL that requests to a remote backend go to: its
// url, or for a unix socket http://localhost and the HTTP path (the
// connection is made to the socket, whatever the host).
func (r *Remote) Endpoint() string {
	if _, path, err := ParseUnixURL(r.URL); err == nil {
		return "http://" + unixHost + path
	}
	return r.URL
}
