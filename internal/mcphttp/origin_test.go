package mcphttp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

func TestOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"https://Example.COM/mcp?key=1":      "https://example.com",
		"https://example.com:443/a/b":        "https://example.com",
		"http://example.com:80/":             "http://example.com",
		"https://example.com:8443/secret/xy": "https://example.com:8443",
		"http://user:pw@[::1]:9000/mcp":      "http://[::1]:9000",
		"http://[::1]/mcp":                   "http://[::1]",
	} {
		u, _ := url.Parse(raw)
		if got := Origin(u); got != want {
			t.Errorf("Origin(%s) = %s, want %s", raw, got, want)
		}
	}
}

// elsewhere is a server of another origin that records every request it
// gets and whether one carried a credential.
type elsewhere struct {
	requests, credentials atomic.Int32
}

func (e *elsewhere) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
		e.credentials.Add(1)
	}
	w.Header().Set("Content-Type", MediaJSON)
	io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
}

// A redirect to another origin (another host or port, or http from
// https) is refused with an error that names it, and nothing, credentials
// least of all, reaches it; a redirect within the origin is followed.
func TestClientRefusesRedirectsToAnotherOrigin(t *testing.T) {
	other := &elsewhere{}
	ts2 := httptest.NewServer(other)
	t.Cleanup(ts2.Close)

	var target atomic.Value
	redirect := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			w.Header().Set("Content-Type", MediaJSON)
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"here":true}}`)
			return
		}
		http.Redirect(w, r, target.Load().(string), http.StatusTemporaryRedirect)
	}
	plain := httptest.NewServer(http.HandlerFunc(redirect))
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(redirect))
	t.Cleanup(tlsSrv.Close)

	for _, tc := range []struct {
		name, server, target string
		hc                   *http.Client
		follow               bool
	}{
		{"same origin", plain.URL, plain.URL + "/mcp", plain.Client(), true},
		{"relative, same origin", plain.URL, "/mcp", plain.Client(), true},
		{"another port", plain.URL, ts2.URL + "/mcp", plain.Client(), false},
		{"another host", plain.URL, strings.Replace(ts2.URL, "127.0.0.1", "localhost", 1) + "/mcp", plain.Client(), false},
		{"https to http", tlsSrv.URL, ts2.URL + "/mcp", tlsSrv.Client(), false},
		{"https to http on its own port", tlsSrv.URL, strings.Replace(tlsSrv.URL, "https:", "http:", 1) + "/mcp", tlsSrv.Client(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target.Store(tc.target)
			c := NewClient(Options{
				Endpoint: tc.server + "/old", HTTP: tc.hc, Peer: `backend "r"`,
				Header: http.Header{"Authorization": {"Bearer tok"}, "X-Api-Key": {"key"}},
			})
			var got []string
			missing, err := c.Exchange(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), []json.RawMessage{json.RawMessage("1")}, nil, func(m []byte) { got = append(got, string(m)) })
			if tc.follow {
				if err != nil || len(missing) != 0 || len(got) != 1 || !strings.Contains(got[0], "here") {
					t.Fatalf("followed redirect: %q, missing %s, %v", got, missing, err)
				}
				return
			}
			var re *RedirectError
			if !errors.As(err, &re) || len(missing) != 1 {
				t.Fatalf("Exchange = missing %s, %v; want a RedirectError", missing, err)
			}
			want := OriginOf(tc.target)
			if re.To != want || re.From != OriginOf(tc.server) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `backend "r"`) {
				t.Errorf("error %q (%+v) does not name %s and the server", err, re, want)
			}
			if n := other.requests.Load(); n != 0 {
				t.Errorf("the other origin got %d requests (%d with a credential)", n, other.credentials.Load())
			}
		})
	}
}
