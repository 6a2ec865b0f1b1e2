package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// client talks to a demo server running in the test over pipes.
type client struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *bufio.Scanner
	nextID int
}

func startServer(t *testing.T) *client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &server{
		log:  slog.New(slog.DiscardHandler),
		now:  func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
		pick: func(n int) int { return n - 1 },
	}
	done := make(chan error, 1)
	go func() {
		done <- s.serve(inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &client{t: t, in: inW, out: bufio.NewScanner(outR)}
}

type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// call sends a request and returns its reply; the server answers in order.
func (c *client) call(method, params string) reply {
	c.t.Helper()
	c.nextID++
	fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", c.nextID, method, params)
	if !c.out.Scan() {
		c.t.Fatalf("%s: no reply: %v", method, c.out.Err())
	}
	var r reply
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
		c.t.Fatalf("%s: reply %q: %v", method, c.out.Bytes(), err)
	}
	if string(r.ID) != fmt.Sprint(c.nextID) {
		c.t.Fatalf("%s: reply id %s, want %d", method, r.ID, c.nextID)
	}
	return r
}

func TestTools(t *testing.T) {
	tests := []struct {
		tool, args     string
		wantText       string
		wantStructured string
		wantError      bool
	}{
		{tool: "echo", args: `{"text":"hello <gateway>"}`, wantText: "hello <gateway>"},
		{tool: "echo", args: `{}`, wantText: "echo needs a string argument text", wantError: true},
		{tool: "add", args: `{"a":2,"b":40}`, wantText: "42", wantStructured: `{"sum":42}`},
		{tool: "add", args: `{"a":0.1,"b":-1.5}`, wantText: "-1.4", wantStructured: `{"sum":-1.4}`},
		{tool: "add", args: `{"a":"2","b":1}`, wantText: "add needs two numbers, a and b", wantError: true},
		{tool: "now", args: `{}`, wantText: "2025-01-02T03:04:05Z (Thursday, UTC)",
			wantStructured: `{"time":"2025-01-02T03:04:05Z","timezone":"UTC","weekday":"Thursday"}`},
		{tool: "now", args: `{"timezone":"Asia/Tokyo"}`, wantText: "2025-01-02T12:04:05+09:00 (Thursday, Asia/Tokyo)",
			wantStructured: `{"time":"2025-01-02T12:04:05+09:00","timezone":"Asia/Tokyo","weekday":"Thursday"}`},
		{tool: "now", args: `{"timezone":"Mars/Olympus"}`, wantText: `unknown time zone "Mars/Olympus": use an IANA name such as Europe/Paris`, wantError: true},
		{tool: "random_quote", args: `{}`, wantText: quotes()[len(quotes())-1]},
	}
	c := startServer(t)
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			r := c.call("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, tt.tool, tt.args))
			if r.Error != nil {
				t.Fatalf("error %v", r.Error)
			}
			var res struct {
				Content           []textContent   `json:"content"`
				StructuredContent json.RawMessage `json:"structuredContent"`
				IsError           bool            `json:"isError"`
			}
			if err := json.Unmarshal(r.Result, &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 || res.Content[0].Text != tt.wantText || res.IsError != tt.wantError || string(res.StructuredContent) != tt.wantStructured {
				t.Errorf("result %s; want text %q, structuredContent %s, isError %v", r.Result, tt.wantText, tt.wantStructured, tt.wantError)
			}
		})
	}
}

func TestProtocol(t *testing.T) {
	tests := []struct {
		method, params string
		wantResult     string // substring of the result
		wantCode       int
	}{
		{method: "initialize", params: `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, wantResult: `"protocolVersion":"2025-06-18"`},
		{method: "initialize", params: `{"protocolVersion":"2030-01-01","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, wantResult: `"protocolVersion":"2025-11-25"`},
		{method: "ping", params: `{}`, wantResult: `{}`},
		{method: "tools/list", params: `{}`, wantResult: `"name":"random_quote"`},
		{method: "resources/list", params: `{}`, wantResult: `"uri":"demo://about"`},
		{method: "resources/read", params: `{"uri":"demo://about"}`, wantResult: `# mcpgate demo server`},
		{method: "resources/read", params: `{"uri":"demo://nope"}`, wantCode: codeResourceNotFound},
		{method: "prompts/list", params: `{}`, wantResult: `"name":"haiku"`},
		{method: "prompts/get", params: `{"name":"haiku","arguments":{"topic":"gateways"}}`, wantResult: `Write a haiku about gateways.`},
		{method: "prompts/get", params: `{"name":"haiku"}`, wantCode: codeInvalidParams},
		{method: "tools/call", params: `{"name":"nope"}`, wantCode: codeInvalidParams},
		{method: "no/such", params: `{}`, wantCode: codeMethodNotFound},
	}
	c := startServer(t)
	// Notifications and junk get no reply, so the next reply still matches its request.
	fmt.Fprint(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\nnot json\n\n")
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			r := c.call(tt.method, tt.params)
			switch {
			case tt.wantCode != 0 && (r.Error == nil || r.Error.Code != tt.wantCode):
				t.Errorf("got %s %+v, want error %d", r.Result, r.Error, tt.wantCode)
			case tt.wantCode == 0 && (r.Error != nil || !strings.Contains(string(r.Result), tt.wantResult)):
				t.Errorf("got %s %+v, want a result containing %s", r.Result, r.Error, tt.wantResult)
			}
		})
	}
}
