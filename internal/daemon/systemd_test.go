// Tests of mcpgated under systemd's protocols (issue 3), run against the
// real binary: socket activation through systemd-socket-activate, the
// sd_notify sequence on a test NOTIFY_SOCKET, the watchdog, reload and stop.
package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// wait bounds every wait for an event; it is long because the binaries run
// with the race detector on a loaded machine, and only a failing test takes it.
const wait = 60 * time.Second

// config returns a configuration from testutil.Config with extra keys in its
// [gateway] section; FAKE in backends is the fake server's path.
func config(t *testing.T, gateway, backends string) (toml, url string) {
	t.Helper()
	toml, url = testutil.Config(t, strings.ReplaceAll(backends, "FAKE", testutil.Build(t).Fake))
	return strings.Replace(toml, "[gateway]\n", "[gateway]\n"+gateway, 1), url
}

// countPrefix counts the names starting with prefix.
func countPrefix(names map[string]bool, prefix string) int {
	n := 0
	for name := range names {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

// status returns a match for the datagram carrying exactly STATUS=line.
func status(line string) func(string) bool { return testutil.Has("STATUS=" + line) }

// awaitLastStatus waits until the last STATUS= the daemon sent is line.
func awaitLastStatus(t *testing.T, d *testutil.Daemon, line string) {
	t.Helper()
	d.Notify.AwaitMessages(t, wait, "last STATUS="+line, func(msgs []string) bool {
		last := ""
		for _, m := range msgs {
			if v, ok := value(m, "STATUS"); ok {
				last = v
			}
		}
		return last == line
	})
}

// logged reports whether one line of out contains every part.
func logged(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// value returns the value of key in an sd_notify datagram.
func value(msg, key string) (string, bool) {
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// index returns the index of the first datagram matching match, or -1.
func index(msgs []string, match func(string) bool) int {
	for i, m := range msgs {
		if match(m) {
			return i
		}
	}
	return -1
}

// recorded returns the methods of the messages a fake server recorded with
// --record, in order, without the server/discover probe.
func recorded(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var methods []string
	for _, line := range strings.Split(string(data), "\n") {
		var m struct{ Method string }
		// The era probe before every handshake is left out: these
		// tests are about the handshake and what follows.
		if line != "" && json.Unmarshal([]byte(line), &m) == nil && m.Method != "server/discover" {
			methods = append(methods, m.Method)
		}
	}
	return methods
}

// recordedCall reports whether a fake server recorded a tools/call of tool:
// the call reached it.
func recordedCall(path, tool string) bool {
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		var m struct {
			Method string
			Params struct{ Name string }
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Method == "tools/call" && m.Params.Name == tool {
			return true
		}
	}
	return false
}

// openGate lets a fake server started with --record path and
// --initialize-barrier 2 answer its initialize: it appends the second
// initialize request the barrier waits for.
func openGate(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"jsonrpc":"2.0","id":"test-gate","method":"initialize","params":{}}` + "\n"); err != nil {
		t.Fatal(err)
	}
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, as MONOTONIC_USEC is.
func monotonicUsec(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Sec*1_000_000 + ts.Nsec/1_000
}

// earlyRequest is an MCP initialize sent on a connection made before the
// daemon serves; the kernel's listen backlog holds both.
type earlyRequest struct {
	conn net.Conn
	req  *http.Request
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"early","version":"1"}}}`

func sendEarly(t *testing.T, network, addr, url string) *earlyRequest {
	t.Helper()
	conn, err := net.DialTimeout(network, addr, wait)
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	req := newPost(t, url, "", initializeBody)
	if err := req.Write(conn); err != nil {
		t.Fatalf("send initialize to %s: %v", addr, err)
	}
	return &earlyRequest{conn: conn, req: req}
}

// answer reads the response to the early request.
func (e *earlyRequest) answer(t *testing.T) (session string, msg map[string]any) {
	t.Helper()
	e.conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(e.conn), e.req)
	if err != nil {
		t.Fatalf("read the answer to an early initialize: %v", err)
	}
	defer resp.Body.Close()
	msg, err = rpcResponse(resp)
	if err != nil {
		t.Fatalf("the answer to an early initialize: %v", err)
	}
	return resp.Header.Get("Mcp-Session-Id"), msg
}

func newPost(t *testing.T, url, session, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return req
}

// post sends one JSON-RPC message and returns the response to it, or nil
// for a notification (202 Accepted).
func post(t *testing.T, hc *http.Client, url, session, body string) map[string]any {
	t.Helper()
	msg, _, err := postRaw(hc, newPost(t, url, session, body))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// postRaw sends req and returns the JSON-RPC response in the answer, nil
// for 202 Accepted, and the session id the answer names. Unlike the SDK
// client it has no standalone stream, whose end at shutdown could overtake
// the answer on another connection.
func postRaw(hc *http.Client, req *http.Request) (msg map[string]any, session string, err error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("POST %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		return nil, "", nil
	}
	msg, err = rpcResponse(resp)
	return msg, resp.Header.Get("Mcp-Session-Id"), err
}

// rawSession starts an MCP session with plain HTTP requests.
func rawSession(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	msg, session, err := postRaw(hc, newPost(t, url, "", initializeBody))
	if err != nil || session == "" || msg["result"] == nil {
		t.Fatalf("initialize: %v, session %q, %v", msg, session, err)
	}
	post(t, hc, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return session
}

// rpcResponse returns the JSON-RPC response in a POST's answer, sent as
// JSON or as an event stream.
func rpcResponse(resp *http.Response) (map[string]any, error) {
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("HTTP %s: %s", resp.Status, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return nil, fmt.Errorf("decode the response: %w", err)
		}
		return m, nil
	}
	events := bufio.NewScanner(resp.Body)
	events.Buffer(nil, 16<<20)
	for events.Scan() {
		data, ok := strings.CutPrefix(events.Text(), "data:")
		if !ok {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) == nil && (m["result"] != nil || m["error"] != nil) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("the event stream ended without a response (%v)", events.Err())
}

// TestSocketActivation starts mcpgated through the real
// systemd-socket-activate with a TCP and a unix socket named "http" and a
// TCP socket of another name: the first connection, over either, starts the
// daemon and is answered; the one named metrics is closed while
// metrics_listen is off; the unix socket file,
// systemd's, stays when the daemon exits.
func TestSocketActivation(t *testing.T) {
	for _, first := range []string{"tcp", "unix"} {
		t.Run("first connection over "+first, func(t *testing.T) {
			port, other := testutil.FreePort(t), testutil.FreePort(t)
			sock := filepath.Join(testutil.ShortTempDir(t), "mcpgate.sock")
			toml, _ := config(t, "", "[backends.alpha]\ncommand = \"FAKE\"\n")
			tcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
			d := testutil.StartDaemon(t, toml, tcpURL, testutil.DaemonOptions{Activate: []string{
				"-l", fmt.Sprintf("127.0.0.1:%d", port), "-l", sock, "-l", fmt.Sprintf("127.0.0.1:%d", other),
				"--fdname=http:http:metrics",
			}})
			// Nothing runs mcpgated until a client connects.
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", d.PID)); !strings.HasSuffix(exe, "systemd-socket-activate") {
				t.Fatalf("before the first connection process %d is %s, want systemd-socket-activate", d.PID, exe)
			}
			if msgs := d.Notify.Messages(); len(msgs) > 0 {
				t.Fatalf("sd_notify before the first connection: %q", msgs)
			}
			connect := map[string]func() *mcp.ClientSession{
				"tcp": func() *mcp.ClientSession { return testutil.Connect(t, tcpURL, nil) },
				"unix": func() *mcp.ClientSession {
					return testutil.ConnectHTTP(t, "http://localhost/mcp", testutil.UnixHTTPClient(sock), nil)
				},
			}
			var ready int
			for i, transport := range []string{first, map[string]string{"tcp": "unix", "unix": "tcp"}[first]} {
				cs := connect[transport]()
				if name := cs.InitializeResult().ServerInfo.Name; name != "mcpgate" {
					t.Errorf("%s: serverInfo.name %q, want mcpgate", transport, name)
				}
				if i == 0 {
					// The first client is served before alpha is ready.
					ready = d.AwaitNotify(t, 0, wait, "READY=1", testutil.Has("READY=1"))
				}
				if names := testutil.ToolNames(t, cs); !names["alpha__echo"] {
					t.Errorf("%s: tools/list has no alpha__echo: %v", transport, names)
				}
			}
			if pid := d.Notify.Sender(ready); pid != d.PID {
				t.Errorf("READY=1 came from PID %d, want the main PID %d (NotifyAccess=main)", pid, d.PID)
			}

			_, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", other))
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("connect to the socket named metrics: %v, want connection refused: it should be closed", err)
			}
			if out := d.Stderr.String(); !logged(out, "closing the socket-activated fd named metrics", "metrics_listen is off") {
				t.Errorf("no warning about the socket named metrics, which starts closed, in:\n%s", out)
			}

			if code := d.Terminate(t); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0", code)
			}
			if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
				t.Errorf("systemd's socket file after the daemon exited: %v, %v; want it left in place", fi, err)
			}
		})
	}
}

// TestMetricsOnActivatedSocket serves /metrics on the socket-activated fd
// named metrics when metrics_listen = "fd:metrics".
func TestMetricsOnActivatedSocket(t *testing.T) {
	port, metricsPort := testutil.FreePort(t), testutil.FreePort(t)
	toml, _ := config(t, "metrics_listen = \"fd:metrics\"\n", "[backends.alpha]\ncommand = \"FAKE\"\n")
	tcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	d := testutil.StartDaemon(t, toml, tcpURL, testutil.DaemonOptions{Activate: []string{
		"-l", fmt.Sprintf("127.0.0.1:%d", port), "-l", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--fdname=http:metrics",
	}})
	testutil.Connect(t, tcpURL, nil)
	d.AwaitNotify(t, 0, wait, "READY=1", testutil.Has("READY=1"))
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	host, _ := os.Hostname()
	if resp.StatusCode != 200 || !strings.Contains(string(body), fmt.Sprintf(`mcpgate_backend_state{backend="alpha",host=%q,state="healthy"} 1`, host)) {
		t.Errorf("GET /metrics on the activated socket: %s\n%s", resp.Status, body)
	}
}

// TestSocketActivationAcceptYesIsRefused runs mcpgated the Accept=yes way:
// it is handed a connection, not a listener, and exits non-zero telling the
// operator to set Accept=no.
func TestSocketActivationAcceptYesIsRefused(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	toml, _ := config(t, "", "[backends.alpha]\ncommand = \"FAKE\"\n")
	d := testutil.StartDaemon(t, toml, "http://"+addr+"/mcp", testutil.DaemonOptions{Activate: []string{
		"--accept", "-l", addr, "--fdname=http",
	}})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	died := regexp.MustCompile(`Child (\d+) died with code (\d+)`)
	d.Stderr.Await(t, wait, "the per-connection daemon's exit", func(out string) bool { return died.MatchString(out) })
	out := d.Stderr.String()
	m := died.FindStringSubmatch(out)
	if m[2] == "0" {
		t.Errorf("the daemon handed a connection exited 0, want non-zero:\n%s", out)
	}
	const want = "mcpgate.socket has Accept=yes; set Accept=no in mcpgate.socket"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	mark := d.Notify.Mark(t) // after everything it sent before it died
	msgs := d.Notify.Messages()[:mark]
	if i := index(msgs, func(s string) bool { v, _ := value(s, "STATUS"); return strings.Contains(v, "set Accept=no") }); i < 0 {
		t.Errorf("no STATUS= naming Accept=no in %q", msgs)
	}
	if i := index(msgs, testutil.Has("READY=1")); i >= 0 {
		t.Errorf("READY=1 sent: %q", msgs)
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	if n, err := conn.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes from the refused connection, want it closed", n)
	}
}

// TestClientsDuringStartupAreServed connects clients, and sends their
// initialize, while a backend is still in its handshake (held by the fake
// server's barrier, which the test opens): each is answered, none is lost
// (TestClientsServedWhileABackendStarts shows they need not wait).
func TestClientsDuringStartupAreServed(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "alpha.record")
	toml, url := config(t, "", fmt.Sprintf("[backends.alpha]\ncommand = \"FAKE\"\nargs = [\"--record\", %q, \"--initialize-barrier\", \"2\"]\n", gate))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{NoWait: true})
	// The listeners are open before the backends start.
	d.AwaitNotify(t, 0, wait, "STATUS= with alpha starting", status("0/1 backend healthy, 0 tools; alpha starting"))

	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	var early []*earlyRequest
	for range 3 {
		early = append(early, sendEarly(t, "tcp", addr, url))
	}
	if i := index(d.Notify.Messages(), testutil.Has("READY=1")); i >= 0 {
		t.Fatal("READY=1 while alpha's handshake is held")
	}
	openGate(t, gate)
	d.AwaitReady(t)

	sessions := map[string]bool{}
	var first string
	for i, e := range early {
		session, msg := e.answer(t)
		result, _ := msg["result"].(map[string]any)
		info, _ := result["serverInfo"].(map[string]any)
		if info["name"] != "mcpgate" || session == "" {
			t.Fatalf("early client %d: session %q, response %v", i, session, msg)
		}
		sessions[session] = true
		if i == 0 {
			first = session
		}
	}
	if len(sessions) != len(early) {
		t.Errorf("%d sessions for %d early clients", len(sessions), len(early))
	}
	// An early session goes on as any other.
	hc := &http.Client{}
	post(t, hc, url, first, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	msg := post(t, hc, url, first, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	raw, _ := json.Marshal(msg["result"])
	if !strings.Contains(string(raw), `"alpha__echo"`) {
		t.Errorf("tools/list of an early session: %v", msg)
	}
}

// TestNotActivatedUnixSocket binds the configured unix socket: a stale
// socket file is replaced, and the daemon removes its own file at exit.
func TestNotActivatedUnixSocket(t *testing.T) {
	sock := filepath.Join(testutil.ShortTempDir(t), "run", "mcpgate.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close() // the file stays; nothing listens on it
	// A second name keeps the stale file's inode from being reused.
	staleLink := sock + ".stale"
	if err := os.Link(sock, staleLink); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(staleLink)
	if err != nil {
		t.Fatal(err)
	}

	toml, url := config(t, "", "[backends.alpha]\ncommand = \"FAKE\"\n")
	toml = regexp.MustCompile(`(?m)^listen = \[(.*)\]$`).ReplaceAllString(toml, fmt.Sprintf("listen = [$1, %q]", "unix:"+sock))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	after, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Error("the stale socket file was not replaced")
	}
	if perm := after.Mode().Perm(); perm != 0o660 {
		t.Errorf("socket mode %v, want 0660", perm)
	}
	cs := testutil.ConnectHTTP(t, "http://localhost/mcp", testutil.UnixHTTPClient(sock), nil)
	if !testutil.ToolNames(t, cs)["alpha__echo"] {
		t.Error("no alpha__echo over the unix socket")
	}
	if code := d.Terminate(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("our socket file after exit: %v, want it removed", err)
	}
}

// TestReadinessWaitsForEveryBackend starts three backends whose handshakes
// take different times. They share a record file and a barrier: each
// answers initialize only once all three received theirs, which only a
// parallel start achieves. READY=1 comes after the slowest finished its
// handshake, after EXTEND_TIMEOUT_USEC, and STATUS= then tells the truth.
func TestReadinessWaitsForEveryBackend(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "shared.record")
	var backends strings.Builder
	for name, delay := range map[string]string{"a": "0s", "b": "300ms", "c": "900ms"} {
		fmt.Fprintf(&backends, "[backends.%s]\ncommand = \"FAKE\"\nargs = [\"--record\", %q, \"--initialize-barrier\", \"3\", \"--handshake-delay\", %q]\n\n", name, rec, delay)
	}
	toml, url := config(t, "", backends.String())
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{NoWait: true})
	ready := d.AwaitNotify(t, 0, wait, "READY=1", testutil.Has("READY=1"))

	// Read at READY=1. A backend turns healthy only once tools/list, sent
	// after the initialize result, is answered; the file only grows.
	methods := recorded(t, rec)
	if n := strings.Count(strings.Join(methods, " "), "tools/list"); n != 3 {
		t.Errorf("at READY=1 %d backends had been sent tools/list, want 3: %q", n, methods)
	}
	if len(methods) < 3 || methods[0] != "initialize" || methods[1] != "initialize" || methods[2] != "initialize" {
		t.Errorf("recorded %q: want all three initialize requests before anything else (a parallel start)", methods)
	}

	msgs := d.Notify.Messages()
	if i := index(msgs, testutil.Has("READY=1")); i != ready {
		t.Errorf("first READY=1 at %d, awaited %d", i, ready)
	}
	extend := index(msgs, func(s string) bool { _, ok := value(s, "EXTEND_TIMEOUT_USEC"); return ok })
	if extend < 0 || extend > ready {
		t.Errorf("EXTEND_TIMEOUT_USEC at %d, want it before READY=1 at %d: %q", extend, ready, msgs)
	} else if v, _ := value(msgs[extend], "EXTEND_TIMEOUT_USEC"); v == "" || v == "0" || strings.Trim(v, "0123456789") != "" {
		t.Errorf("EXTEND_TIMEOUT_USEC=%q, want a positive number", v)
	}
	for i, m := range msgs {
		if pid := d.Notify.Sender(i); pid != d.PID {
			t.Errorf("datagram %d %q from PID %d, want the main PID %d", i, m, pid, d.PID)
		}
	}
	cs := d.Connect(t, nil)
	tools := len(testutil.ToolNames(t, cs))
	d.AwaitNotify(t, 0, wait, "the status line", status(fmt.Sprintf("3/3 backends healthy, %d tools", tools)))
}

// TestStatusShowsRestarts checks the exact STATUS= line while all is well
// and while a crashed backend waits to restart.
func TestStatusShowsRestarts(t *testing.T) {
	toml, url := config(t, "", `
[backends.alpha]
command = "FAKE"
restart_backoff_initial = "30s"
restart_backoff_max = "30s"

[backends.beta]
command = "FAKE"
`)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	cs := d.Connect(t, nil)
	names := testutil.ToolNames(t, cs)
	d.AwaitNotify(t, 0, wait, "the status line", status(fmt.Sprintf("2/2 backends healthy, %d tools", len(names))))
	from := len(d.Notify.Messages())
	if _, err := testutil.CallTool(t, cs, "alpha__crash", map[string]any{"code": 3}); err == nil {
		// The answer is an error either way; how it is carried is not
		// this test's business.
		t.Log("alpha__crash answered")
	}
	// alpha's tools stay listed through its restart (catalog_grace).
	d.AwaitNotify(t, from, wait, "the status line of a restarting backend",
		status(fmt.Sprintf("1/2 backends healthy, %d tools; alpha restarting (1/5)", len(names))))
}

// TestRequiredBackend: a required backend that cannot start makes the
// daemon exit non-zero instead of becoming ready, saying why in STATUS= and
// ERRNO=; one not required only shows up in the status.
func TestRequiredBackend(t *testing.T) {
	for _, required := range []bool{true, false} {
		t.Run(fmt.Sprintf("required=%v", required), func(t *testing.T) {
			toml, url := config(t, "", fmt.Sprintf(`
[backends.must]
command = "FAKE"
args = ["--exit-at-start", "3"]
required = %v
max_restarts = 1
restart_backoff_initial = "10ms"
restart_backoff_max = "20ms"

[backends.ok]
command = "FAKE"
`, required))
			d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{NoWait: true})
			if !required {
				d.AwaitReady(t)
				d.AwaitNotify(t, 0, wait, "the status line", func(s string) bool {
					v, _ := value(s, "STATUS")
					return strings.HasPrefix(v, "1/2 backends healthy, ") && strings.HasSuffix(v, " tools; must failed")
				})
				return
			}
			if code := d.AwaitExit(t, wait); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			mark := d.Notify.Mark(t) // after everything it sent before it exited
			msgs := d.Notify.Messages()[:mark]
			if i := index(msgs, testutil.Has("READY=1")); i >= 0 {
				t.Errorf("READY=1 sent: %q", msgs)
			}
			last, errno := "", -1
			for i, m := range msgs {
				if v, ok := value(m, "STATUS"); ok {
					last = v
				}
				if _, ok := value(m, "ERRNO"); ok {
					errno = i
				}
			}
			const want = `failed: required backend "must" could not start: `
			if !strings.HasPrefix(last, want) || !strings.Contains(last, "exited with status 3") {
				t.Errorf("last STATUS=%q, want %q… naming the exit status; all: %q", last, want, msgs)
			}
			if errno < 0 {
				t.Errorf("no ERRNO= in %q", msgs)
			} else if v, _ := value(msgs[errno], "ERRNO"); v == "0" || strings.Trim(v, "0123456789") != "" || v == "" {
				t.Errorf("ERRNO=%q, want a positive errno", v)
			}
		})
	}
}

// TestReload: SIGHUP applies a changed configuration between RELOADING=1
// (with MONOTONIC_USEC) and READY=1, touching only what changed; a broken
// one changes nothing and STATUS= shows the error with file and line.
func TestReload(t *testing.T) {
	fake := testutil.Build(t).Fake
	v1 := fmt.Sprintf(`
[backends.keep]
command = %[1]q

[backends.change]
command = %[1]q
args = ["--name", "v1"]

[backends.gone]
command = %[1]q
`, fake)
	toml, url := config(t, "", v1)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	ev := testutil.NewClientEvents("reload")
	cs := d.Connect(t, ev.ClientOptions())
	keep, change, gone := testutil.FakeProcess(t, cs, "keep__pid").PID, testutil.FakeProcess(t, cs, "change__pid").PID, testutil.FakeProcess(t, cs, "gone__pid").PID

	write := func(backends string) {
		t.Helper()
		cfg, _ := config(t, "", backends)
		// Keep the gateway section, with its port, as it was.
		cfg = toml[:strings.Index(toml, "\n\n")+2] + cfg[strings.Index(cfg, "\n\n")+2:]
		if err := os.WriteFile(d.ConfigPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// reload sends SIGHUP and returns the datagram indexes of RELOADING=1
	// and of the READY=1 that ends the reload.
	reload := func() (reloading, ready int) {
		t.Helper()
		from := len(d.Notify.Messages())
		before := monotonicUsec(t)
		d.Signal(syscall.SIGHUP)
		i := d.AwaitNotify(t, from, wait, "RELOADING=1", testutil.Has("RELOADING=1"))
		after := monotonicUsec(t)
		v, ok := value(d.Notify.Messages()[i], "MONOTONIC_USEC")
		usec, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || usec < before || usec > after {
			t.Errorf("RELOADING=1 datagram %q: want MONOTONIC_USEC between %d and %d", d.Notify.Messages()[i], before, after)
		}
		return i, d.AwaitNotify(t, i+1, wait, "READY=1 after RELOADING=1", testutil.Has("READY=1"))
	}

	write(fmt.Sprintf(`
[backends.keep]
command = %[1]q

[backends.change]
command = %[1]q
args = ["--name", "v2"]

[backends.added]
command = %[1]q
`, fake))
	listChanged := testutil.Method("notifications/tools/list_changed")
	seen := ev.Count(listChanged)
	reloading, _ := reload()
	// READY=1 does not wait for the handshakes of added and of change's
	// successor (change's old child is gone by then, and its tools with
	// it): they join the catalog when these end, as at start-up.
	for n := seen + 1; ; n++ {
		if names := testutil.ToolNames(t, cs); names["added__pid"] && names["change__pid"] {
			break
		}
		ev.Await(t, n, wait, "tools/list_changed with added and change", listChanged)
	}
	if got := testutil.FakeProcess(t, cs, "keep__pid").PID; got != keep {
		t.Errorf("unchanged backend: PID %d after reload, was %d", got, keep)
	}
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "keep__echo", map[string]any{"text": "still here"})); got != "still here" {
		t.Errorf("keep__echo over the session from before the reload: %q", got)
	}
	newChange := testutil.FakeProcess(t, cs, "change__pid").PID
	if newChange == change {
		t.Errorf("changed backend kept its PID %d", change)
	}
	if cs.InitializeResult() == nil {
		t.Fatal("no initialize result")
	}
	added := testutil.FakeProcess(t, cs, "added__pid").PID
	// Apply returns, and READY=1 follows, only once the old children are
	// reaped.
	for what, pid := range map[string]int{"removed backend": gone, "changed backend's old child": change} {
		if st := testutil.State(pid); st != "" {
			t.Errorf("%s: process %d still there (state %s) after READY=1", what, pid, st)
		}
	}
	names := testutil.ToolNames(t, cs)
	if countPrefix(names, "gone__") != 0 || countPrefix(names, "added__") == 0 {
		t.Errorf("tools after reload: %v", names)
	}
	// The line may equal the one before the reload; the limiter does not
	// repeat it. What counts is what systemd shows last.
	awaitLastStatus(t, d, fmt.Sprintf("3/3 backends healthy, %d tools", len(names)))

	// A syntax error: nothing changes.
	good, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	broken := string(good) + "\n[backends.broken\ncommand = \"x\"\n"
	line := strings.Count(string(good), "\n") + 2
	if err := os.WriteFile(d.ConfigPath, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	reloading, _ = reload()
	where := fmt.Sprintf("%s:%d", d.ConfigPath, line)
	d.AwaitNotify(t, reloading, wait, "STATUS= with the reload error", func(s string) bool {
		v, _ := value(s, "STATUS")
		return strings.HasPrefix(v, "reload failed: ") && strings.Contains(v, where) && strings.Contains(v, "running the previous configuration")
	})
	for name, pid := range map[string]int{"keep__pid": keep, "change__pid": newChange, "added__pid": added} {
		if got := testutil.FakeProcess(t, cs, name).PID; got != pid {
			t.Errorf("%s: PID %d after a failed reload, was %d", name, got, pid)
		}
	}
	if after := testutil.ToolNames(t, cs); len(after) != len(names) {
		t.Errorf("%d tools after a failed reload, were %d", len(after), len(names))
	}
}

// TestReloadDoesNotWaitForHandshakes holds a backend that a reload adds in
// its handshake: the reload ends (READY=1) while the backend is still in
// it, and the backend joins the catalog with tools/list_changed once its
// handshake ends, as at start-up (issue 46, item 4).
func TestReloadDoesNotWaitForHandshakes(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "slow.record")
	toml, url := config(t, "", "[backends.alpha]\ncommand = \"FAKE\"\n")
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	ev := testutil.NewClientEvents("reload")
	cs := d.Connect(t, ev.ClientOptions())
	tools := len(testutil.ToolNames(t, cs))
	cfg := toml + fmt.Sprintf("\n[backends.slow]\ncommand = %q\nargs = [\"--record\", %q, \"--initialize-barrier\", \"2\"]\n", testutil.Build(t).Fake, gate)
	if err := os.WriteFile(d.ConfigPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	from := len(d.Notify.Messages())
	d.Signal(syscall.SIGHUP)
	i := d.AwaitNotify(t, from, wait, "RELOADING=1", testutil.Has("RELOADING=1"))
	// Only the test opens slow's gate, below: a reload that waited for
	// the handshake would never get here.
	d.AwaitNotify(t, i+1, wait, "READY=1 while slow is held in its handshake", testutil.Has("READY=1"))
	d.AwaitNotify(t, i, wait, "STATUS= with slow starting", status(fmt.Sprintf("1/2 backends healthy, %d tools; slow starting", tools)))
	// slow is in its handshake: it got its initialize and is held.
	deadline := time.Now().Add(wait)
	for m := recorded(t, gate); len(m) == 0 || m[0] != "initialize"; m = recorded(t, gate) {
		if time.Now().After(deadline) {
			t.Fatalf("slow recorded %q, want its initialize", m)
		}
		time.Sleep(20 * time.Millisecond) // a file, no event to await
	}
	if countPrefix(testutil.ToolNames(t, cs), "slow__") != 0 {
		t.Error("slow's tools are listed while it is in its handshake")
	}

	listChanged := testutil.Method("notifications/tools/list_changed")
	seen := ev.Count(listChanged)
	openGate(t, gate)
	for n := seen + 1; ; n++ {
		ev.Await(t, n, wait, "tools/list_changed once slow is ready", listChanged)
		if countPrefix(testutil.ToolNames(t, cs), "slow__") > 0 {
			break
		}
	}
	awaitLastStatus(t, d, fmt.Sprintf("2/2 backends healthy, %d tools", len(testutil.ToolNames(t, cs))))
}

// TestReloadKeepsPettingTheWatchdog holds a reload in the stop of the
// backend it removes, one that ignores both the end of its stdin and
// SIGTERM, so that only SIGKILL ends it after its two grace periods: the
// daemon keeps answering its liveness check meanwhile, so a slow stop on
// reload does not get it killed.
func TestReloadKeepsPettingTheWatchdog(t *testing.T) {
	toml, url := config(t, `shutdown_grace_period = "1s"
`, "[backends.alpha]\ncommand = \"FAKE\"\n\n[backends.stubborn]\ncommand = \"FAKE\"\nargs = [\"--ignore-eof\", \"--ignore-sigterm\"]\n")
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Watchdog: 400 * time.Millisecond})
	cfg := toml[:strings.Index(toml, "\n[backends.stubborn]")] + "\n"
	if err := os.WriteFile(d.ConfigPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	from := len(d.Notify.Messages())
	d.Signal(syscall.SIGHUP)
	i := d.AwaitNotify(t, from, wait, "RELOADING=1", testutil.Has("RELOADING=1"))
	ready := d.AwaitNotify(t, i+1, wait, "READY=1 after the reload", testutil.Has("READY=1"))
	pets := 0
	for _, m := range d.Notify.Messages()[i+1 : ready] {
		if testutil.Has("WATCHDOG=1")(m) {
			pets++
		}
	}
	// The stop takes the two grace periods, 2s; WATCHDOG=1 comes every
	// 200ms.
	if pets < 3 {
		t.Errorf("%d WATCHDOG=1 while the reload waited for stubborn's stop, want at least 3", pets)
	}
}

// TestWatchdog runs mcpgated with WATCHDOG_USEC and WATCHDOG_PID as systemd
// sets them: WATCHDOG=1 keeps coming at half the interval, a failed backend
// does not stop it, and a wedged main loop does.
func TestWatchdog(t *testing.T) {
	const interval = 400 * time.Millisecond
	// No backend process runs: the daemon is killed wedged, and this
	// machine's PID 1 would not reap orphans.
	toml, url := config(t, "", `
[backends.broken]
command = "FAKE"
args = ["--exit-at-start", "1"]
max_restarts = 0
`)
	// SIGUSR2 wedges the main loop of a test build (testutil.Build).
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Watchdog: interval})
	i := d.AwaitNotify(t, 0, wait, "READY=1", testutil.Has("READY=1"))
	const pets = 6
	var first, last time.Time
	for n := range pets {
		i = d.AwaitNotify(t, i+1, wait, "WATCHDOG=1", testutil.Has("WATCHDOG=1"))
		if pid := d.Notify.Sender(i); pid != d.PID {
			t.Errorf("WATCHDOG=1 from PID %d, want the main PID %d", pid, d.PID)
		}
		switch n {
		case 0:
			first = time.Now()
		case pets - 1:
			last = time.Now()
		}
	}
	// A lower bound only: load delays pets, it does not hasten them. At half
	// the interval, pets-1 gaps take (pets-1)/2 intervals less the first
	// check's quarter interval; a quarter interval per gap is the floor.
	gap := last.Sub(first) / (pets - 1)
	t.Logf("mean gap between WATCHDOG=1: %v (WATCHDOG_USEC %v)", gap, interval)
	if gap < interval/4 {
		t.Errorf("WATCHDOG=1 every %v on average, want about every %v", gap, interval/2)
	}

	d.Signal(syscall.SIGUSR2)
	d.Stderr.Await(t, wait, "the main loop wedging itself", func(out string) bool {
		return strings.Contains(out, "test fault: the main loop is wedged")
	})
	// Datagrams sent before the loop wedged are queued before this mark.
	// Only a round whose ping the loop answered just before can still pet,
	// once; no later round gets an answer.
	mark := d.Notify.Mark(t)
	d.Notify.AtMost(t, mark+1, 4*interval, 1, "WATCHDOG=1 from a wedged daemon", testutil.Has("WATCHDOG=1"))
	d.Stderr.Await(t, wait, "the watchdog logging the failing liveness check", func(out string) bool {
		return strings.LastIndex(out, "liveness check failed") > strings.LastIndex(out, "liveness check passes again")
	})
	d.Kill(t) // wedged: SIGTERM would go unanswered
}

// TestStop: SIGTERM sends STOPPING=1, refuses new calls and sessions,
// lets a call in flight finish, cuts one that hangs off at drain_timeout
// with an error to its client, shuts the backends down the graceful way
// (stdin closed, then SIGTERM to the one that does not react) and exits 0
// leaving no process.
func TestStop(t *testing.T) {
	dir := t.TempDir()
	workRec, stuckRec := filepath.Join(dir, "work.record"), filepath.Join(dir, "stuck.record")
	toml, url := config(t, "drain_timeout = \"3s\"\nshutdown_grace_period = \"300ms\"\n", fmt.Sprintf(`
[backends.work]
command = "FAKE"
args = ["--record", %q]

[backends.stuck]
command = "FAKE"
args = ["--record", %q]
`, workRec, stuckRec))
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	slowClient, lateClient := d.Connect(t, nil), d.Connect(t, nil)
	workPID, stuckPID := testutil.FakeProcess(t, lateClient, "work__pid").PID, testutil.FakeProcess(t, lateClient, "stuck__pid").PID
	hc := &http.Client{}
	hangSession := rawSession(t, hc, url)

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	slow := make(chan outcome, 1)
	go func() {
		res, err := testutil.CallTool(t, slowClient, "work__slow", map[string]any{"ms": 1000})
		slow <- outcome{res, err}
	}()
	type rawOutcome struct {
		msg map[string]any
		err error
	}
	hang := make(chan rawOutcome, 1)
	hangReq := newPost(t, url, hangSession, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"stuck__hang","arguments":{}}}`)
	go func() {
		msg, _, err := postRaw(hc, hangReq)
		hang <- rawOutcome{msg, err}
	}()
	testutil.Eventually(t, wait, "both calls at their backends", func() bool {
		return recordedCall(workRec, "slow") && recordedCall(stuckRec, "hang")
	})

	from := len(d.Notify.Messages())
	d.Signal(syscall.SIGTERM)
	d.AwaitNotify(t, from, wait, "STOPPING=1", testutil.Has("STOPPING=1"))
	// New calls and sessions are refused from STOPPING=1 on: an open
	// session is not found (404), so that its client initializes again,
	// which a balancer sends to another host, and a new one gets 503.
	if res, err := testutil.CallTool(t, lateClient, "work__echo", map[string]any{"text": "late"}); err == nil && !res.IsError {
		t.Errorf("a call during the drain was answered: %q", testutil.ToolText(res))
	} else if msg := fmt.Sprint(err, res); !strings.Contains(msg, "session not found") {
		t.Errorf("a call during the drain: %s; want session not found", msg)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "late", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	if cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, testutil.LegacySession()); err == nil {
		cs.Close()
		t.Error("a new session during the drain was accepted")
	} else if !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("a new session during the drain: %v; want 503 Service Unavailable", err)
	}
	cancel()

	got := <-slow
	if got.err != nil || got.res.IsError || testutil.ToolText(got.res) != "slept 1000 ms" {
		t.Errorf("the call in flight at SIGTERM: %v %v, want its answer", got.err, got.res)
	}
	cut := <-hang // the client's own timeout bounds this
	rpcErr, _ := cut.msg["error"].(map[string]any)
	if msg, _ := rpcErr["message"].(string); cut.err != nil || !strings.Contains(msg, "did not finish within drain_timeout (3s)") || rpcErr["code"] != float64(-32003) {
		t.Errorf("the hanging call: %v, %v; want error -32003 naming drain_timeout", cut.msg, cut.err)
	}

	if code := d.AwaitExit(t, wait); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	mark := d.Notify.Mark(t) // after everything it sent before it exited
	msgs := d.Notify.Messages()[:mark]
	last := ""
	for _, m := range msgs[from:] {
		if v, ok := value(m, "STATUS"); ok {
			last = v
		}
	}
	if last != "stopping: shutting backends down" {
		t.Errorf("last STATUS=%q, want the daemon's own word on stopping: %q", last, msgs[from:])
	}
	out := d.Stderr.String()
	for _, want := range [][]string{
		{"drain timeout reached"},
		// work saw its stdin close and exited by itself; stuck did not
		// read it and was terminated after the grace period.
		{`msg="backend \"work\" stopped: `, "backend=work", fmt.Sprint(workPID), `exit="exited with status 0"`},
		{`backend \"stuck\" did not exit in time; sending SIGTERM to its process group`, "backend=stuck", "signal=SIGTERM"},
		{`msg="backend \"stuck\" stopped: `, "backend=stuck", fmt.Sprint(stuckPID), `exit="killed by signal SIGTERM"`},
	} {
		if !logged(out, want...) {
			t.Errorf("no log line with all of %q", want)
		}
	}
	for _, pid := range []int{workPID, stuckPID} {
		if st := testutil.State(pid); st != "" {
			t.Errorf("backend process %d left (state %s)", pid, st)
		}
	}
}
