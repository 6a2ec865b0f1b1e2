package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/mcphttp"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// tasksGateway runs mcpgated with auth required and three clients: alice
// and bob may use everything, carol only the fake backend's echo. Its
// backends: everything (server-everything over stdio, whose
// simulate-research-query is a 2025-11-25 task tool) with one call at a
// time and a short queue, modern (the 2026-07-28 fixture over stdio,
// whose tasks-2026.mjs implements the tasks extension), and fake.
func tasksGateway(t *testing.T) *testutil.Daemon {
	t.Helper()
	fixture := filepath.Join(testutil.CacheDir(), "npm", "everything-server-2026.mjs")
	if _, err := os.Stat(fixture); err != nil {
		testutil.Unavailable(t, "the 2026-07-28 fixture is not installed (packaging/ci/deps.sh): %v", err)
	}
	argv, env := modernStdio(t)
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.everything]
command = %q
args = ["stdio"]
max_concurrent_calls = 1
queue_timeout = "200ms"

[backends.modern]
command = %q
args = [%q, "--stdio"]
env = { NODE_PATH = %q }

[backends.fake]
command = %q

[clients.alice]
token_sha256 = %q

[clients.bob]
token_sha256 = %q

[clients.carol]
token_sha256 = %q
tools = ["fake__echo"]
`, testutil.NpmServer(t, "mcp-server-everything"), argv[0], fixture, env["NODE_PATH"], testutil.Build(t).Fake,
		sha256Hex(aliceToken), sha256Hex(bobToken), sha256Hex(carolToken)),
		testutil.ConfigOptions{Auth: "required", Gateway: `audit = "calls"`})
	return testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
}

// modernStdio is the node binary and NODE_PATH of the 2026 fixture.
func modernStdio(t *testing.T) ([]string, map[string]string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node is not installed: %v", err)
	}
	return []string{node}, map[string]string{"NODE_PATH": filepath.Join(testutil.CacheDir(), "npm", "node_modules")}
}

// rpc is one JSON-RPC answer.
type rpc struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// field decodes the member path of the result.
func (a rpc) field(t *testing.T, path ...string) any {
	t.Helper()
	var v any
	if a.Result == nil {
		return nil
	}
	if err := json.Unmarshal(a.Result, &v); err != nil {
		t.Fatalf("result %s: %v", a.Result, err)
	}
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

func (a rpc) str(t *testing.T, path ...string) string {
	s, _ := a.field(t, path...).(string)
	return s
}

// taskSession is a raw 2025-11-25 session of a client with a token.
type taskSession struct {
	url, token, session string
	next                int
}

func newTaskSession(t *testing.T, url, token string) (*taskSession, rpc) {
	t.Helper()
	s := &taskSession{url: url, token: token}
	resp, answers := s.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"tasks","version":"1"}}}`)
	s.session = resp.Header.Get("Mcp-Session-Id")
	if s.session == "" || len(answers) == 0 {
		t.Fatalf("initialize: HTTP %d, no session", resp.StatusCode)
	}
	s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s, answers[len(answers)-1]
}

// post sends body and returns every message of the answer, in order.
func (s *taskSession) post(t *testing.T, body string) (*http.Response, []rpc) {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 60*time.Second), http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	if s.session != "" {
		req.Header.Set("Mcp-Session-Id", s.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []rpc
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		es := mcphttp.NewEventReader(resp.Body, 16<<20)
		for {
			data, err := es.Message()
			if err != nil {
				break
			}
			var a rpc
			if json.Unmarshal(data, &a) == nil && (a.Result != nil || a.Error != nil) {
				out = append(out, a)
			}
		}
		return resp, out
	}
	var a rpc
	if json.NewDecoder(resp.Body).Decode(&a) == nil {
		out = append(out, a)
	}
	return resp, out
}

// call sends a request and returns its one answer.
func (s *taskSession) call(t *testing.T, method, params string) rpc {
	t.Helper()
	s.next++
	_, answers := s.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, s.next, method, params))
	if len(answers) != 1 {
		t.Fatalf("%s %s: %d answers, want exactly one", method, params, len(answers))
	}
	return answers[0]
}

// events opens the session's event stream and returns its messages, in
// order, until the test ends.
func (s *taskSession) events(t *testing.T) <-chan string {
	t.Helper()
	out, _ := s.closableEvents(t)
	return out
}

// closableEvents is events with the function that closes the stream
// before the test ends.
func (s *taskSession) closableEvents(t *testing.T) (<-chan string, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Mcp-Session-Id", s.session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", resp, err)
	}
	out := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		es := mcphttp.NewEventReader(resp.Body, 1<<20)
		for {
			data, err := es.Message()
			if err != nil {
				return
			}
			select {
			case out <- string(data):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, cancel
}

// statelessTask sends one 2026-07-28 request of the client with token,
// declaring the tasks extension unless plain, with the Mcp-Name header a
// method of its needs (name), and returns its answer.
func statelessTask(t *testing.T, url, token, method, name, params string, plain bool) rpc {
	t.Helper()
	caps := `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	if plain {
		caps = `{}`
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{%s,%s}}`, method, meta, params)
	headers := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Authorization", "Bearer " + token}
	if name != "" {
		headers = append(headers, "Mcp-Name", name)
	}
	_, answer := exchange(t, http.DefaultClient, url, body, headers...)
	last := answer
	for _, line := range strings.Split(answer, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" {
			last = d
		}
	}
	var a rpc
	if err := json.Unmarshal([]byte(last), &a); err != nil {
		t.Fatalf("%s: %s: %v", method, answer, err)
	}
	return a
}

// killBackend kills the child of the daemon whose command line holds
// what, as a crash would, and returns its pid.
func killBackend(t *testing.T, d *testutil.Daemon, what string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(d.PID) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), what) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no child of mcpgated runs %s", what)
	return 0
}
