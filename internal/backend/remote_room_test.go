package backend

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// A remote server's answer to a call is read with room in front, as a
// child's line is: the gateway splices the client's id into it in place
// (jsonrpc.SpliceResult), so a large result is never copied, whether the
// server answered with JSON or on an event stream.
func TestRemoteAnswerSplicedInPlace(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
	}{{"json", true}, {"event stream", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sdkServer()
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: tc.json})
			url := serveSDK(t, srv, false, func(http.Handler) http.Handler { return h })
			r := runRemote(t, remoteConfig(url), "")
			r.await(t, "healthy", healthy)
			type answer struct {
				out []byte
				ok  bool
				err error
			}
			got := make(chan answer, 1)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			const clientID = `"a client's id, longer than the backend's"`
			_, err := r.b.Conn().Go(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"in place"}}`), nil, func(m *jsonrpc.Message, err error) {
				if err != nil {
					got <- answer{err: err}
					return
				}
				out, ok := jsonrpc.SpliceResult(m, m.Result, json.RawMessage(clientID))
				got <- answer{out: append([]byte(nil), out...), ok: ok}
			})
			if err != nil {
				t.Fatal(err)
			}
			var a answer
			select {
			case a = <-got:
			case <-ctx.Done():
				t.Fatal("no answer")
			}
			if a.err != nil || !a.ok {
				t.Fatalf("SpliceResult ok = %v (%v); want the answer spliced in place", a.ok, a.err)
			}
			m, err := jsonrpc.Parse(a.out)
			if err != nil || string(m.ID) != clientID || !json.Valid(m.Result) {
				t.Errorf("spliced answer %s (%v); want the result under the client's id", a.out, err)
			}
		})
	}
}
