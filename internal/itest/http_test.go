package itest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// rawClient speaks Streamable HTTP by hand, for what a real client library
// never sends.
type rawClient struct {
	url     string
	session string
	header  map[string]string // sent with every request, such as Authorization
}

// newRawClient opens a session with the given initialize params.
func newRawClient(t *testing.T, url string) *rawClient {
	t.Helper()
	c := &rawClient{url: url}
	resp, body := c.do(t, "POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	c.session = resp.Header.Get("Mcp-Session-Id")
	if c.session == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	c.do(t, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	return c
}

// post sends a message in the session and returns the response body.
func (c *rawClient) post(t *testing.T, body string) string {
	t.Helper()
	resp, out := c.do(t, "POST", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s %s", body, resp.Status, out)
	}
	return out
}

func (c *rawClient) do(t *testing.T, method, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, c.url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(bytes.TrimSpace(out))
}

func TestHTTPTransport(t *testing.T) {
	d := gateway(t, "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	other := &rawClient{url: d.URL}
	tests := []httpCase{
		{"ping is answered", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, 200, `{"jsonrpc":"2.0","id":1,"result":{}}`},
		{"notification accepted", c, "POST", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, nil, 202, ``},
		{"invalid JSON", c, "POST", `{"jsonrpc":`, nil, 400, `"code":-32700`},
		{"not JSON-RPC", c, "POST", `{"hello":1}`, nil, 400, `"code":-32600`},
		{"missing session", other, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, 400, `missing Mcp-Session-Id`},
		{"unknown session", other, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Mcp-Session-Id": "nope"}, 404, `not found`},
		{"foreign origin", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Origin": "https://evil.example"}, 403, `allowed_origins`},
		{"local origin", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Origin": "http://localhost:3000"}, 200, `"result":{}`},
		{"foreign host", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Host": "evil.example"}, 403, `allowed_hosts`},
		{"unsupported protocol version", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, 400, `unsupported`},
		{"older protocol header accepted", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Mcp-Protocol-Version": "2025-03-26"}, 200, `"result":{}`},
		{"batch refused after 2025-11-25", c, "POST", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil, 400, `only clients that negotiated 2025-03-26`},
		{"GET without event stream", c, "GET", ``, map[string]string{"Accept": "application/json"}, 406, `text/event-stream`},
		{"wrong method", c, "PUT", ``, nil, 405, `use POST, GET or DELETE`},
		{"unknown method", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"nope/nothing"}`, nil, 200, `"code":-32601`},
		{"bad cursor", c, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"garbage"}}`, nil, 200, `"code":-32602`},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// httpCase is one request of a raw client and the answer it must get.
type httpCase struct {
	name       string
	client     *rawClient
	method     string
	body       string
	header     map[string]string // set (or, with "", removed) over the client's own
	wantStatus int
	wantBody   string // a substring of the answer; "" for an empty body
}

// check sends the request and checks the answer.
func (tt httpCase) check(t *testing.T) {
	resp, body := tt.client.do(t, tt.method, tt.body, tt.header)
	if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantBody) || (tt.wantBody == "" && body != "") {
		t.Errorf("%s %.120q → %d %.300s; want %d with %q", tt.method, tt.body, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
	}
}

func TestRequestBodyLimit(t *testing.T) {
	d := gateway(t, "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s__echo","arguments":{"text":"` + strings.Repeat("x", 17<<20) + `"}}}`
	resp, body := c.do(t, "POST", big, nil)
	if resp.StatusCode != 413 || !strings.Contains(body, "max_message_bytes") {
		t.Errorf("oversized body → %d %.200s; want 413 naming max_message_bytes", resp.StatusCode, body)
	}
}

func TestDeletedSessionIsGone(t *testing.T) {
	d := gateway(t, "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	if resp, body := c.do(t, "DELETE", "", nil); resp.StatusCode != 200 {
		t.Fatalf("DELETE → %d %s", resp.StatusCode, body)
	}
	if resp, _ := c.do(t, "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); resp.StatusCode != 404 {
		t.Errorf("use after DELETE → %d, want 404", resp.StatusCode)
	}
}

func TestEventStreamCarriesProgressBeforeTheResponse(t *testing.T) {
	d := gateway(t, "[backends.s]\ncommand = \"FAKE\"\n")
	c := newRawClient(t, d.URL)
	resp, body := c.do(t, "POST", `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"s__progress","arguments":{"steps":3},"_meta":{"progressToken":"mine"}}}`, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want an event stream", ct)
	}
	var datas []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" {
			datas = append(datas, d)
		}
	}
	if len(datas) != 4 {
		t.Fatalf("got %d events, want 3 progress + 1 response:\n%s", len(datas), body)
	}
	for i, d := range datas[:3] {
		if !strings.Contains(d, `"method":"notifications/progress"`) || !strings.Contains(d, `"progressToken":"mine"`) {
			t.Errorf("event %d = %s; want progress under the client's own token", i, d)
		}
	}
	if !strings.HasPrefix(datas[3], `{"jsonrpc":"2.0","id":"p","result":`) {
		t.Errorf("last event = %s; want the response", datas[3])
	}
	if !strings.HasPrefix(body, "id: ") || !strings.Contains(body, "retry: ") {
		t.Errorf("no priming event with id and retry:\n%s", body)
	}
}
