package http1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// nodeFetch is the head Node's fetch (undici) sends for an MCP POST,
// as captured from Node 20: lower-case names, Connection: keep-alive.
const nodeFetch = "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:7790\r\nconnection: keep-alive\r\n" +
	"content-type: application/json\r\naccept: application/json, text/event-stream\r\n" +
	"mcp-session-id: abc\r\nmcp-protocol-version: 2025-11-25\r\naccept-language: *\r\n" +
	"sec-fetch-mode: cors\r\nuser-agent: node\r\naccept-encoding: gzip, deflate\r\n" +
	"content-length: 40\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`

// FuzzPlainIsReadRequest holds readPlain to http.ReadRequest: for any
// bytes, it either consumes nothing and returns nil, or returns the
// request net/http's parser returns for the same bytes, every field
// equal, its body the same bytes with the same error, and leaves the
// reader where net/http's leaves it.
func FuzzPlainIsReadRequest(f *testing.F) {
	for _, s := range []string{
		nodeFetch,
		"POST /mcp HTTP/1.1\r\nHost: a\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 2\r\nAccept: a, b\r\n" +
			"Content-Type: application/json\r\nMcp-Session-Id: x\r\nAccept-Encoding: gzip\r\n\r\n{}GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET /a/../b HTTP/1.1\r\nHost: a\r\nAccept: x\r\naccept: y\r\nACCEPT:z\r\n\r\n",
		"DELETE /mcp HTTP/1.1\r\nHost: a\r\nConnection: Close\r\nX-Empty:\r\nX-Ows: \t v \t\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nshort",
		"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc",
		"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 0003\r\n\r\nabc",
		"POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-Folded: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-Obs: caf\xc3\xa9\r\nPragma: no-cache\r\n\r\n",
		"GET /%41?q=1 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
		"post / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
		"GET / HTTP/1.1\r\n" + strings.Repeat("X-Many: v\r\n", 20) + "\r\n",
		"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nH: 8\r\nI: 9\r\nJ: 10\r\n" +
			"K: 11\r\nL: 12\r\nM: 13\r\nN: 14\r\nHost: h\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		br.Peek(1) // as the connection loop does before it parses
		var body plainBody
		got := readPlain(br, &body)
		if got == nil {
			if rest, _ := io.ReadAll(br); !bytes.Equal(rest, data) {
				t.Fatalf("readPlain declined %q but consumed part of it", data)
			}
			return
		}
		wr := bufio.NewReader(bytes.NewReader(data))
		want, err := http.ReadRequest(wr)
		if err != nil {
			t.Fatalf("readPlain took %q, which net/http's parser refuses: %v", data, err)
		}
		gotBody, gotErr := io.ReadAll(got.Body)
		wantBody, wantErr := io.ReadAll(want.Body)
		if !bytes.Equal(gotBody, wantBody) || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: body %q (%v), net/http's %q (%v)", data, gotBody, gotErr, wantBody, wantErr)
		}
		gotRest, _ := io.ReadAll(br)
		wantRest, _ := io.ReadAll(wr)
		if !bytes.Equal(gotRest, wantRest) {
			t.Fatalf("%q: left %q, net/http's parser leaves %q", data, gotRest, wantRest)
		}
		got.Body, want.Body = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nreadPlain: %#v\nnet/http:  %#v", data, got, want)
		}
	})
}

// TestPlainTakesWhatClientsSend checks that the heads real clients send
// are plain: the Go client's, as it writes it, and Node's fetch's.
func TestPlainTakesWhatClientsSend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heads := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			heads <- nil
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		n, _ := io.ReadAtLeast(c, buf, 1)
		for !bytes.Contains(buf[:n], []byte("\r\n\r\n")) && n < len(buf) {
			m, err := c.Read(buf[n:])
			if err != nil {
				break
			}
			n += m
		}
		heads <- buf[:n]
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "0123456789abcdef")
	req.Header.Set("Authorization", "Bearer x")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	go tr.RoundTrip(req) // its answer never comes: the connection closes
	goHead := <-heads
	if goHead == nil {
		t.Fatal("the Go client sent nothing")
	}

	for name, head := range map[string]string{"Go's client": string(goHead), "Node's fetch": nodeFetch} {
		var body plainBody
		br := bufio.NewReader(strings.NewReader(head))
		br.Peek(1)
		r := readPlain(br, &body)
		if r == nil {
			t.Errorf("%s's request is not plain:\n%s", name, head)
			continue
		}
		if r.Header.Get("Mcp-Session-Id") == "" || r.Host == "" || r.ContentLength <= 0 {
			t.Errorf("%s: %#v", name, r)
		}
	}
}
