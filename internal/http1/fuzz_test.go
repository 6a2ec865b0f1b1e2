package http1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

type seen struct {
	method, uri, body string
}

// FuzzServeAgreesWithReadRequest feeds a connection arbitrary bytes. The
// requests the handler is given must be, in order, the first of those
// http.ReadRequest finds in the same bytes, bodies included: the server
// never sees a request where net/http's parser sees none, or a different
// one (no request smuggling through the connection loop), and it never
// panics.
func FuzzServeAgreesWithReadRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n",
		"POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got []seen
		s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			got = append(got, seen{r.Method, r.RequestURI, string(body)})
			if len(body)%2 == 1 {
				w.(http.Flusher).Flush() // a chunked answer, too
			}
			w.Write(body)
		})}
		c := s.newConn(fakeConn{bytes.NewReader(data)}) // then EOF: the client closed
		for c.serveOne() {
		}

		var want []seen
		br := bufio.NewReader(bytes.NewReader(data))
		for len(want) < len(got) {
			req, err := http.ReadRequest(br)
			if err != nil {
				break
			}
			body, err := io.ReadAll(req.Body) // a handler is called for a request whose body then fails
			want = append(want, seen{req.Method, req.RequestURI, string(body)})
			if err != nil {
				break
			}
		}
		if len(want) != len(got) {
			t.Fatalf("the handler saw %d requests, net/http's parser finds %d:\n%q\n%q", len(got), len(want), got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("request %d: the handler saw %q, net/http's parser finds %q", i, got[i], want[i])
			}
		}
	})
}
