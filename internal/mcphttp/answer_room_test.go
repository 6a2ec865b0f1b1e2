package mcphttp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// bigResponse is a JSON-RPC response to id 1 whose result holds n bytes
// of text.
func bigResponse(n int) string {
	return `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", n) + `"}]}}`
}

// A large answer is read once into a buffer of its own, sized from its
// Content-Length, with the room asked for in front: a JSON answer into
// exactly its size, an event of an event stream grown at most once past
// 64 KiB. What reading it allocates is about the message, once; reading
// it grown by doubling (as without a Content-Length) allocates about
// twice as much, which the last case shows the measure can see.
func TestReadAnswerRoomHoldsALargeMessageOnce(t *testing.T) {
	const size = 8 << 20
	msg := bigResponse(size)
	const room = 256
	for _, tc := range []struct {
		name, media, body string
		contentLength     int64
		most              float64 // the most allocated, in multiples of the message; 0: no bound
	}{
		{"json with Content-Length", MediaJSON, "\n" + msg + "\n", int64(len(msg) + 2), 1.05},
		{"event stream with Content-Length", MediaSSE, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: " + msg + "\n\n", -2, 1.05},
		{"json without Content-Length", MediaJSON, msg, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := tc.contentLength
			if cl == -2 {
				cl = int64(len(tc.body))
			}
			var got []byte
			var at int
			deliver := func(buf []byte, a int) {
				if strings.Contains(string(buf[a:min(len(buf), a+40)]), `"id":1`) {
					got, at = buf, a
				}
			}
			resp := &http.Response{StatusCode: 200, ContentLength: cl, Header: http.Header{"Content-Type": {tc.media}}, Body: io.NopCloser(strings.NewReader(tc.body))}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			missing, err := ReadAnswerRoom(resp, []json.RawMessage{json.RawMessage("1")}, 16<<20, room, "peer", deliver)
			runtime.ReadMemStats(&after)
			if err != nil || len(missing) != 0 {
				t.Fatalf("missing %v, err %v", missing, err)
			}
			if string(got[at:]) != msg || at < room || !bytes.Equal(got[:room], make([]byte, room)) {
				t.Fatalf("delivered %d bytes at %d; want the message after %d bytes of room", len(got)-at, at, room)
			}
			allocated := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(msg))
			t.Logf("allocated %.2f× the message (cap %d for %d bytes)", allocated, cap(got), len(got))
			if tc.most > 0 && allocated > tc.most {
				t.Errorf("reading the answer allocated %.2f× the message; want at most %.2f×", allocated, tc.most)
			}
			if tc.contentLength == -1 && allocated < 1.5 {
				t.Errorf("without a Content-Length the answer allocated only %.2f×: the measure cannot tell a grown buffer", allocated)
			}
			if tc.media == MediaJSON && tc.contentLength > 0 && cap(got) != room+len(tc.body) {
				t.Errorf("cap %d; want exactly room+Content-Length, %d", cap(got), room+len(tc.body))
			}
		})
	}
}
