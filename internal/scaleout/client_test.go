package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// session is one 2025-era MCP client session, spoken raw so that the test
// sees every status code the balancer and the hosts answer.
type session struct {
	hc    *http.Client
	url   string
	id    string // Mcp-Session-Id; "" before initialize
	owner string // the host that answered the first call
	next  int    // the next JSON-RPC id
}

// outcome is the answer to one request: an HTTP status and body, or the
// transport error that kept it from coming.
type outcome struct {
	status int
	body   string
	err    error
}

func (o outcome) String() string {
	if o.err != nil {
		return o.err.Error()
	}
	return fmt.Sprintf("%d %s", o.status, strings.TrimSpace(o.body))
}

// post sends one JSON-RPC message in the session.
func (s *session) post(ctx context.Context, body string) (outcome, http.Header) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		return outcome{err: err}, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return outcome{err: err}, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return outcome{status: resp.StatusCode, body: string(b), err: err}, resp.Header
}

// initialize starts a new session; on failure the session has none.
func (s *session) initialize(ctx context.Context) outcome {
	s.id, s.owner = "", ""
	out, hdr := s.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"scaleout","version":"1"}}}`)
	if out.err != nil || out.status != http.StatusOK {
		return out
	}
	if s.id = hdr.Get("Mcp-Session-Id"); s.id == "" {
		return outcome{err: fmt.Errorf("initialize answered without Mcp-Session-Id: %s", out)}
	}
	if n, _ := s.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); n.err != nil || n.status != http.StatusAccepted {
		s.id = ""
		return n
	}
	return out
}

// call calls tool and returns the text of its result, or the outcome that
// is not a result. A result for another id than the request's is an error.
func (s *session) call(ctx context.Context, tool, args string) (string, outcome) {
	s.next++
	id := s.next
	out, _ := s.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	if out.err != nil || out.status != http.StatusOK {
		return "", out
	}
	var resp struct {
		ID     int `json:"id"`
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.NewDecoder(bytes.NewReader([]byte(out.body))).Decode(&resp); err != nil {
		return "", outcome{status: out.status, body: out.body, err: fmt.Errorf("undecodable answer %q: %v", out.body, err)}
	}
	if resp.ID != id || resp.Result == nil || resp.Result.IsError || len(resp.Result.Content) == 0 {
		return "", outcome{status: out.status, body: out.body, err: fmt.Errorf("request %d answered with %s", id, out.body)}
	}
	return resp.Result.Content[0].Text, out
}
