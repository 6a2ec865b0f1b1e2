// Package load is the benchmark's load generator: MCP sessions over
// Streamable HTTP, each on its own keep-alive connection, calling one tool
// back to back.
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/bench/internal/splice"
)

// Protocol is the MCP version the sessions negotiate: one every gateway
// of the benchmark speaks.
const Protocol = "2025-06-18"

// CallTimeout bounds every HTTP request: a gateway that takes longer has
// failed the call.
const CallTimeout = 30 * time.Second

// Session is one MCP session on one connection.
type Session struct {
	url     string
	http    *http.Client
	id      string // Mcp-Session-Id, if the gateway gave one
	next    int64
	body    []byte
	resp    bytes.Buffer
	payload string
	shared  bool   // the client is shared with other sessions
	token   string // sent as a bearer token, if set
	// stateless makes the "session" a 2026-07-28 client: no initialize,
	// each request carries the protocol version in _meta and headers.
	stateless bool
}

// NewSession returns a session of its own keep-alive connection to url;
// calls will send payload as the echo tool's text.
func NewSession(url string, payload string) *Session {
	return &Session{url: url, http: Client(1), payload: payload}
}

// Client returns an HTTP client of at most conns keep-alive connections.
func Client(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		DisableCompression:  true,
		IdleConnTimeout:     5 * time.Minute,
	}}
}

// Close ends the MCP session with DELETE, as a client that is done
// should, and closes its connection. Gateways without sessions may refuse
// the DELETE; that is not an error here.
func (s *Session) Close() {
	if s.id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.url, nil); err == nil {
			req.Header.Set("Mcp-Session-Id", s.id)
			req.Header.Set("Mcp-Protocol-Version", Protocol)
			if resp, err := s.http.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	if !s.shared {
		s.http.CloseIdleConnections()
	}
}

// Initialize starts the MCP session.
func (s *Session) Initialize(ctx context.Context) error {
	s.next++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpbench","version":"1"}}}`, s.next, Protocol)
	hdr, msg, err := s.post(ctx, []byte(body), s.next)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if splice.Value(msg, "result") == nil {
		return fmt.Errorf("initialize: %.200s", msg)
	}
	s.id = hdr.Get("Mcp-Session-Id")
	if _, _, err := s.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), 0); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	return nil
}

// Call calls the tool (echo with the payload, or blob of n bytes when
// blob > 0) and checks that the result came back.
func (s *Session) Call(ctx context.Context, blob int) error {
	s.next++
	b := append(s.body[:0], `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, s.next, 10)
	if blob > 0 {
		b = append(b, `,"method":"tools/call","params":{"name":"blob","arguments":{"bytes":`...)
		b = strconv.AppendInt(b, int64(blob), 10)
		b = append(b, `}}}`...)
	} else {
		b = append(b, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`...)
		b = append(b, s.payload...)
		if s.stateless {
			b = append(b, `"},"_meta":`+meta2026+`}}`...)
		} else {
			b = append(b, `"}}}`...)
		}
	}
	s.body = b
	_, msg, err := s.post(ctx, b, s.next)
	if err != nil {
		return err
	}
	result := splice.Value(msg, "result")
	if result == nil {
		return fmt.Errorf("no result: %.300s", msg)
	}
	if want := max(blob, len(s.payload)); len(result) < want {
		return fmt.Errorf("result of %d bytes, want at least %d", len(result), want)
	}
	if bytes.Contains(result[:min(len(result), 40)], []byte(`"isError":true`)) {
		return fmt.Errorf("tool error: %.300s", result)
	}
	return nil
}

// post sends one message and returns the response headers and the
// JSON-RPC response with id (nil for a notification), whether it came as
// plain JSON or in an event stream.
func (s *Session) post(ctx context.Context, body []byte, id int64) (http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", Protocol)
	}
	if s.stateless {
		setHeaders2026(req, body)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	s.resp.Reset()
	if _, err := s.resp.ReadFrom(resp.Body); err != nil {
		return nil, nil, fmt.Errorf("reading the response: %w", err)
	}
	if id == 0 && resp.StatusCode/100 == 2 {
		return resp.Header, nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("HTTP %s: %.200s", resp.Status, text(s.resp.Bytes()))
	}
	data := s.resp.Bytes()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = findEvent(data, id)
		if data == nil {
			return nil, nil, fmt.Errorf("no response with id %d in the event stream: %.200s", id, s.resp.Bytes())
		}
	}
	if got := splice.Value(data, "id"); string(got) != strconv.FormatInt(id, 10) {
		return nil, nil, fmt.Errorf("response id %s, want %d", got, id)
	}
	return resp.Header, data, nil
}

// findEvent returns the data of the event carrying the response with id.
func findEvent(stream []byte, id int64) []byte {
	want := strconv.FormatInt(id, 10)
	for len(stream) > 0 {
		line := stream
		if i := bytes.IndexByte(stream, '\n'); i >= 0 {
			line, stream = stream[:i], stream[i+1:]
		} else {
			stream = nil
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimLeft(data, " ")
		if string(splice.Value(data, "id")) == want {
			return data
		}
	}
	return nil
}

// ErrNotReady is returned by Probe when the gateway did not answer in
// time.
var ErrNotReady = errors.New("gateway not ready")

// Probe waits until a session can be initialized at url and the echo tool
// answers, for at most timeout.
func Probe(ctx context.Context, url string, timeout time.Duration) error {
	return ProbeToken(ctx, url, "", timeout)
}

// ProbeToken is Probe with a bearer token.
func ProbeToken(ctx context.Context, url, token string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		s := NewSession(url, "probe")
		s.token = token
		err := s.Initialize(ctx)
		if err == nil {
			err = s.Call(ctx, 0)
		}
		s.Close()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrNotReady, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// text is an error body as one line of text, without HTML tags.
func text(body []byte) string {
	return strings.Join(strings.Fields(tags.ReplaceAllString(string(body), " ")), " ")
}

var tags = regexp.MustCompile(`<[^>]*>`)
