package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

func TestReadAnswer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		ctype, body string
		ids         []string
		delivered   []string
		missing     []string
		wantErr     string
	}{
		{"accepted", 202, "", "", nil, nil, nil, ""},
		{"json", 200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`, []string{"1"}, []string{`{"jsonrpc":"2.0","id":1,"result":{}}`}, nil, ""},
		{"sse with a notification first", 200, "text/event-stream",
			"id: a\nretry: 10\ndata: \n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
			[]string{"1"}, []string{`{"jsonrpc":"2.0","method":"notifications/progress"}`, `{"jsonrpc":"2.0","id":1,"result":{}}`}, nil, ""},
		{"sse ends before the response", 200, "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n\n",
			[]string{"1"}, []string{`{"jsonrpc":"2.0","id":9,"method":"ping"}`}, []string{"1"}, "peer ended the event stream before answering"},
		{"server error", 503, "text/plain", "down for maintenance", []string{"1"}, nil, []string{"1"}, "peer answered HTTP 503: down for maintenance"},
		{"json-rpc error in the body", 400, "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}`, []string{"1"}, nil, []string{"1"}, "bad (code -32600)"},
		{"empty json answer", 200, "application/json", "", []string{"1"}, nil, []string{"1"}, "peer's answer held no response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {tc.ctype}}, Body: io.NopCloser(strings.NewReader(tc.body))}
			var ids []json.RawMessage
			for _, id := range tc.ids {
				ids = append(ids, json.RawMessage(id))
			}
			var got []string
			missing, err := ReadAnswer(resp, ids, 1<<20, "peer", func(b []byte) { got = append(got, string(b)) })
			if !slices.Equal(got, tc.delivered) {
				t.Errorf("delivered %q, want %q", got, tc.delivered)
			}
			var gotMissing []string
			for _, id := range missing {
				gotMissing = append(gotMissing, string(id))
			}
			if !slices.Equal(gotMissing, tc.missing) {
				t.Errorf("missing %q, want %q", gotMissing, tc.missing)
			}
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A server that echoes the token it was sent does not get it into an
// error: the client's errors never hold its secrets, and the kind of the
// error (a JSON-RPC error, an HTTP status) survives.
func TestClientRedactsSecrets(t *testing.T) {
	const token = "the-token-1234"
	for _, tc := range []struct {
		name string
		body func(auth string) string
		is   func(error) bool
	}{
		{"plain text", func(a string) string { return "refused " + a }, func(err error) bool {
			var se *StatusError
			return errors.As(err, &se) && se.Code == 401
		}},
		{"json-rpc error", func(a string) string {
			return `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"refused ` + a + `","data":"` + a + `"}}`
		}, func(err error) bool {
			var je *jsonrpc.Error
			return errors.As(err, &je) && je.Code == -32001 && je.Data == nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, tc.body(r.Header.Get("Authorization")))
			}))
			defer ts.Close()
			c := NewClient(Options{Endpoint: ts.URL, HTTP: ts.Client(), Peer: "peer",
				Header: http.Header{"Authorization": {"Bearer " + token}}, Secrets: []string{token}})
			_, err := c.Exchange(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), []json.RawMessage{json.RawMessage("1")}, nil, func([]byte) {})
			if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "[redacted]") || !tc.is(err) {
				t.Errorf("err = %v; want the refusal, redacted, of its kind", err)
			}
		})
	}
}
