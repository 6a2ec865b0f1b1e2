package ctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// bridgeGateway starts mcpgated with one fake server backend named fake,
// listening on a unix socket too, and returns it with the socket's path.
func bridgeGateway(t *testing.T) (*testutil.Daemon, string) {
	t.Helper()
	bins := testutil.Build(t)
	toml, url, socket := testutil.SocketConfig(t, fmt.Sprintf("[backends.fake]\ncommand = %q\n", bins.Fake))
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{}), socket
}

// bridgeClient runs "mcpgatectl bridge ARGS" under the Go SDK's stdio
// client.
func bridgeClient(t *testing.T, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, *testutil.Buffer) {
	t.Helper()
	cmd := exec.Command(testutil.Build(t).Ctl, append([]string{"bridge"}, args...)...)
	cmd.Env = testutil.Env()
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcpgatectl bridge stderr:\n%s", stderr.String())
		}
	})
	return testutil.ConnectCommand(t, cmd, opts), stderr
}

func bridgeCall(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("call %s: %v", params.Name, err)
	}
	if res.IsError {
		t.Fatalf("call %s: tool error %s", params.Name, testutil.ToolText(res))
	}
	return res
}

func bridgeTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// bridgeAwait receives from ch within 30 seconds.
func bridgeAwait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// bridgeSessionIDs returns the sessions the daemon logged as started, in order.
func bridgeSessionIDs(d *testutil.Daemon) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`session started.*?session=([0-9a-f]+)`).FindAllStringSubmatch(d.Stderr.String(), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// bridgeSocketClient is an HTTP client for the daemon's unix socket.
func bridgeSocketClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// TestBridgeRelaysThroughDaemon drives the bridge with the Go SDK's stdio
// client: tools, progress, a sampling request from a backend answered by
// the client while another call goes through, and a notification on the
// standalone stream. Stdin EOF ends the bridge with status 0 and deletes
// its session.
func TestBridgeRelaysThroughDaemon(t *testing.T) {
	d, socket := bridgeGateway(t)
	progress := make(chan *mcp.ProgressNotificationParams, 10)
	sampling := make(chan *mcp.CreateMessageParams, 1)
	release := make(chan struct{})
	listChanged := make(chan struct{}, 10)
	cs, _ := bridgeClient(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampling <- req.Params
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "hello from the client"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
	}, "--socket", socket)

	if names := bridgeTools(t, cs); !slices.Contains(names, "fake__echo") || !slices.Contains(names, "fake__sample") {
		t.Fatalf("tools through the bridge = %v, want the fake server's under fake__", names)
	}
	if got := testutil.ToolText(bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{"text": "héllo \"bridge\"\n"}})); got != "héllo \"bridge\"\n" {
		t.Errorf("echo = %q", got)
	}

	t.Run("progress", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "fake__progress", Arguments: map[string]any{"steps": 3}}
		params.SetProgressToken("tok-1")
		bridgeCall(t, cs, params)
		for i := 1; i <= 3; i++ {
			p := bridgeAwait(t, progress, fmt.Sprintf("progress notification %d", i))
			if p.ProgressToken != "tok-1" || p.Progress != float64(i) || p.Total != 3 {
				t.Errorf("progress %d = %+v", i, p)
			}
		}
	})

	t.Run("sampling while another call runs", func(t *testing.T) {
		type outcome struct {
			res *mcp.CallToolResult
			err error
		}
		sampled := make(chan outcome, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fake__sample"})
			sampled <- outcome{res, err}
		}()
		req := bridgeAwait(t, sampling, "sampling/createMessage at the client")
		if len(req.Messages) != 1 || req.MaxTokens != 100 {
			t.Errorf("sampling request = %+v, want the fake server's one message and maxTokens 100", req)
		}
		// The sample call waits for the client; others must not wait for it.
		if got := testutil.ToolText(bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{"text": "meanwhile"}})); got != "meanwhile" {
			t.Errorf("echo during sampling = %q", got)
		}
		close(release)
		out := bridgeAwait(t, sampled, "the sample call's result")
		if out.err != nil || out.res.IsError {
			t.Fatalf("sample = %v, %v", out.res, out.err)
		}
		var sc struct {
			Result struct {
				Model   string `json:"model"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		raw, _ := json.Marshal(out.res.StructuredContent)
		if err := json.Unmarshal(raw, &sc); err != nil || sc.Result.Model != "test-model" || sc.Result.Content.Text != "hello from the client" {
			t.Errorf("the backend got %s from the client, want the handler's answer", raw)
		}
	})

	t.Run("standalone stream", func(t *testing.T) {
		bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__set_tools", Arguments: map[string]any{"names": []string{"added"}}})
		bridgeAwait(t, listChanged, "notifications/tools/list_changed")
		if names := bridgeTools(t, cs); !slices.Contains(names, "fake__added") {
			t.Errorf("tools after set_tools = %v, want fake__added", names)
		}
	})

	ids := bridgeSessionIDs(d)
	if len(ids) != 1 {
		t.Fatalf("the daemon logged sessions %v, want one", ids)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("the bridge did not exit 0 at stdin EOF: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://localhost/mcp", nil)
	req.Header.Set("Mcp-Session-Id", ids[0])
	req.Header.Set("Accept", "text/event-stream")
	resp, err := bridgeSocketClient(socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the session after the bridge exited: HTTP %d, want 404 (deleted)", resp.StatusCode)
	}
}

// TestBridgeReopensEventStream takes the bridge's standalone stream over
// with a GET of our own: the bridge re-opens it (taking it back, which
// ends ours), and notifications still reach the client.
func TestBridgeReopensEventStream(t *testing.T) {
	d, socket := bridgeGateway(t)
	listChanged := make(chan struct{}, 10)
	cs, _ := bridgeClient(t, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
	}, "--socket", socket)
	bridgeTools(t, cs)
	ids := bridgeSessionIDs(d)
	if len(ids) != 1 {
		t.Fatalf("the daemon logged sessions %v, want one", ids)
	}

	ctx := testutil.Context(t, 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/mcp", nil)
	req.Header.Set("Mcp-Session-Id", ids[0])
	req.Header.Set("Accept", "text/event-stream")
	resp, err := bridgeSocketClient(socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the session's stream: HTTP %d", resp.StatusCode)
	}
	// Only the bridge re-opening its stream ends ours.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("our stream ended with %v, want the end the bridge's takeover brings", err)
	}
	bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__set_tools", Arguments: map[string]any{"names": []string{"later"}}})
	bridgeAwait(t, listChanged, "notifications/tools/list_changed after the stream was re-opened")
}

// TestBridgeRenewsSessionAfterRestart restarts the daemon under the
// bridge: the next call starts a new session, transparently, and the
// client is told the tool list may have changed.
func TestBridgeRenewsSessionAfterRestart(t *testing.T) {
	bins := testutil.Build(t)
	toml, url, socket := testutil.SocketConfig(t, fmt.Sprintf("[backends.fake]\ncommand = %q\n", bins.Fake))
	first := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	listChanged := make(chan struct{}, 10)
	cs, stderr := bridgeClient(t, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
	}, "--socket", socket)
	bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{"text": "before"}})

	first.Signal(syscall.SIGTERM)
	bridgeAwait(t, first.Exited(), "the first daemon to exit")
	second := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})

	if got := testutil.ToolText(bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{"text": "after"}})); got != "after" {
		t.Errorf("echo after the restart = %q", got)
	}
	bridgeAwait(t, listChanged, "notifications/tools/list_changed for the new session")
	if ids := bridgeSessionIDs(second); len(ids) != 1 {
		t.Errorf("the new daemon logged sessions %v, want one", ids)
	}
	if !strings.Contains(stderr.String(), "starting a new one") {
		t.Errorf("the bridge did not log the new session; stderr:\n%s", stderr.String())
	}
}

// bridgeProc is "mcpgatectl bridge" spoken to line by line.
type bridgeProc struct {
	stdin  io.WriteCloser
	lines  chan []byte
	exit   <-chan error
	stderr *testutil.Buffer
}

func startBridge(t *testing.T, env []string, args ...string) *bridgeProc {
	t.Helper()
	cmd := exec.Command(testutil.Build(t).Ctl, append([]string{"bridge"}, args...)...)
	cmd.Env = testutil.Env(env...)
	p := &bridgeProc{lines: make(chan []byte, 64), stderr: &testutil.Buffer{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	p.exit = testutil.StartExit(t, cmd)
	w.Close()
	go func() {
		defer close(p.lines)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			p.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcpgatectl bridge stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *bridgeProc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("write to the bridge: %v", err)
	}
}

// next returns the next line the bridge writes.
func (p *bridgeProc) next(t *testing.T) []byte {
	t.Helper()
	var line []byte
	var ok bool
	select {
	case line, ok = <-p.lines:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for a line from the bridge")
	}
	if !ok {
		t.Fatal("the bridge closed stdout")
	}
	return line
}

// finish closes stdin and returns the exit status, after checking that
// nothing more was written.
func (p *bridgeProc) finish(t *testing.T) error {
	t.Helper()
	p.stdin.Close()
	for line := range p.lines {
		t.Errorf("unexpected line from the bridge: %s", line)
	}
	return bridgeAwait(t, p.exit, "the bridge to exit")
}

// TestBridgeDaemonNotRunning: each request gets an error that says how to
// find out why, the bridge keeps going, and exits 0 at EOF.
func TestBridgeDaemonNotRunning(t *testing.T) {
	dir := testutil.ShortTempDir(t)
	missing := filepath.Join(dir, "missing.sock")
	port := testutil.FreePort(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"socket", nil, []string{"--socket", missing},
			[]string{"cannot reach mcpgate at " + missing, "is mcpgate running? Check with: systemctl status mcpgate.socket"}},
		{"url", nil, []string{"--url", fmt.Sprintf("http://127.0.0.1:%d/mcp", port)},
			[]string{fmt.Sprintf("cannot reach mcpgate at http://127.0.0.1:%d/mcp", port), "connection refused", "systemctl status mcpgate.socket"}},
		{"user", []string{"XDG_RUNTIME_DIR=" + dir}, []string{"--user"},
			[]string{"cannot reach mcpgate at " + filepath.Join(dir, "mcpgate", "mcpgate.sock"), "systemctl --user status mcpgate.socket"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startBridge(t, tc.env, tc.args...)
			p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			p.send(t, `{"jsonrpc":"2.0","id":"two","method":"tools/list"}`)
			for _, id := range []string{`1`, `"two"`} {
				line := p.next(t)
				var resp struct {
					ID    json.RawMessage `json:"id"`
					Error struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(line, &resp); err != nil || string(resp.ID) != id || resp.Error.Code != codeUnreachable {
					t.Fatalf("answer %s, want an error %d for id %s", line, codeUnreachable, id)
				}
				for _, w := range tc.want {
					if !strings.Contains(resp.Error.Message, w) {
						t.Errorf("error message %q does not say %q", resp.Error.Message, w)
					}
				}
			}
			if err := p.finish(t); err != nil {
				t.Errorf("exit: %v, want status 0", err)
			}
			if n := strings.Count(p.stderr.String(), "cannot reach mcpgate"); n != 1 {
				t.Errorf("stderr tells %d times that mcpgate is unreachable, want once:\n%s", n, p.stderr.String())
			}
		})
	}
}

// TestBridgeRelaysBytesAndFinishesAtEOF checks the wire: ids and payloads
// pass byte for byte, one message per line, and a request still running
// when stdin ends is answered before the bridge exits 0.
func TestBridgeRelaysBytesAndFinishesAtEOF(t *testing.T) {
	_, socket := bridgeGateway(t)
	p := startBridge(t, nil, "--socket", socket)
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if line := p.next(t); !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"`)) {
		t.Fatalf("initialize answer: %s", line)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, ` {"jsonrpc":"2.0","id":"caf\u00e9","method":"tools/call","params":{"name":"fake__echo","arguments":{"text":"\ud83d\ude00 \u00e9"},"_meta":{"k":[1.50, 2e3]}}} `)
	line := p.next(t)
	for _, want := range []string{`"id":"caf\u00e9"`, `"arguments":{"text":"\ud83d\ude00 \u00e9"}`, `"rawMeta":"{\"k\":[1.50, 2e3]}"`, `"text":"😀 é"`} {
		if !bytes.Contains(line, []byte(want)) {
			t.Errorf("answer lacks %s:\n%s", want, line)
		}
	}
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fake__slow","arguments":{"ms":300}}}`)
	p.stdin.Close()
	if line := p.next(t); !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":7,"result":`)) || !bytes.Contains(line, []byte("slept 300 ms")) {
		t.Errorf("the call running at EOF was answered with %s", line)
	}
	if err := p.finish(t); err != nil {
		t.Errorf("exit: %v, want status 0", err)
	}
}

func TestBridgeArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "http://127.0.0.1:1/mcp", "--socket", "/x"}, "cannot be combined"},
		{[]string{"--url", "ftp://example.com/"}, "not an http:// or https:// URL"},
		{[]string{"--url", "unix:/run/mcpgate/mcpgate.sock"}, "names no HTTP path after the socket's"},
		{[]string{"--endpoint", "mcp"}, `does not start with "/"`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--nonsense"}, "flag provided but not defined"},
	} {
		var stderr bytes.Buffer
		if code := runBridge(tc.args, strings.NewReader(""), io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("bridge %q = %d, %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestBridgeOutOneLinePerMessage: a message that spans lines is compacted
// without touching its strings; one that cannot be is dropped.
func TestBridgeOutOneLinePerMessage(t *testing.T) {
	var buf bytes.Buffer
	out := &bridgeOut{w: &buf, log: slog.New(slog.DiscardHandler)}
	out.write([]byte("{\"id\":\"caf\\u00e9\",\n  \"result\": {\"t\": \"a  b\\n\"}}\n"))
	out.write([]byte("{\"id\":1}"))
	out.write([]byte("not\njson"))
	want := "{\"id\":\"caf\\u00e9\",\"result\":{\"t\":\"a  b\\n\"}}\n{\"id\":1}\n"
	if buf.String() != want {
		t.Errorf("stdout = %q, want %q", buf.String(), want)
	}
}

// TestBridgeCancelledRequestGetsNoResponse: a request the client cancels
// after its answer became an event stream gets no response, not an error
// about the stream ending.
func TestBridgeCancelledRequestGetsNoResponse(t *testing.T) {
	_, socket := bridgeGateway(t)
	p := startBridge(t, nil, "--socket", socket)
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	p.next(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"fake__progress","arguments":{"steps":2,"ms":1500},"_meta":{"progressToken":"p"}}}`)
	if line := p.next(t); !bytes.Contains(line, []byte(`"method":"notifications/progress"`)) {
		t.Fatalf("want the first progress notification, got %s", line)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"test"}}`)
	p.send(t, `{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	if line := p.next(t); string(line) != `{"jsonrpc":"2.0","id":"ping","result":{}}` {
		t.Errorf("after the cancellation the bridge wrote %s, want only the ping's result", line)
	}
	if err := p.finish(t); err != nil {
		t.Errorf("exit: %v, want status 0", err)
	}
}

// TestBridgeOverURL relays to the daemon's TCP endpoint.
func TestBridgeOverURL(t *testing.T) {
	d, _ := bridgeGateway(t)
	cs, _ := bridgeClient(t, nil, "--url", d.URL)
	if got := testutil.ToolText(bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{"text": "tcp"}})); got != "tcp" {
		t.Errorf("echo over --url = %q", got)
	}
}

// TestBridgeOverUnixURL relays to the daemon's unix socket named by --url
// unix:SOCKET:PATH, the form of a remote backend's url.
func TestBridgeOverUnixURL(t *testing.T) {
	_, socket := bridgeGateway(t)
	cs, _ := bridgeClient(t, nil, "--url", "unix:"+socket+":/mcp")
	if got := testutil.ToolText(bridgeCall(t, cs, &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{"text": "unix"}})); got != "unix" {
		t.Errorf("echo over --url unix: = %q", got)
	}
}
