package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor bounds every wait for something the fake server should do.
const waitFor = 10 * time.Second

// quietFor is how long a check that something does not happen waits.
const quietFor = 300 * time.Millisecond

// fakeBinary is the fake server built once by TestMain.
var fakeBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakeserver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeBinary = filepath.Join(dir, "fakeserver")
	args := []string{"build", "-o", fakeBinary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fakeserver:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running fake server in its own process group.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout chan []byte // lines without newline; closed at EOF
	stderr chan string // lines; extra lines are dropped rather than block the child
	exited chan struct{}
	nextID int
}

// msg is a JSON-RPC message read from the fake server.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// start runs the fake server with args and extra environment; the process
// group is killed and the server reaped when the test ends.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(fakeBinary, args...)
	// GORACE: a -race build otherwise sleeps a second before exiting.
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()

	p := &proc{
		t:      t,
		cmd:    cmd,
		stdin:  stdin,
		stdout: make(chan []byte, 64),
		stderr: make(chan string, 1<<16),
		exited: make(chan struct{}),
	}
	done := make(chan struct{})
	go func() {
		defer close(p.stdout)
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case p.stdout <- bytes.TrimSuffix(line, []byte("\n")):
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			select {
			case p.stderr <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(waitFor):
			t.Errorf("fake server %d not reaped", cmd.Process.Pid)
		}
		close(done)
		outR.Close()
		errR.Close()
	})
	return p
}

// send writes one line.
func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write to fake server: %v", err)
	}
}

// request sends a request with a fresh numeric id and returns the id.
func (p *proc) request(method, params string) string {
	p.t.Helper()
	p.nextID++
	id := strconv.Itoa(p.nextID)
	p.sendRequest(id, method, params)
	return id
}

func (p *proc) sendRequest(id, method, params string) {
	p.t.Helper()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q`, id, method)
	if params != "" {
		line += `,"params":` + params
	}
	p.send(line + "}")
}

// line returns the next stdout line.
func (p *proc) line() []byte {
	p.t.Helper()
	select {
	case l, ok := <-p.stdout:
		if !ok {
			p.t.Fatal("fake server closed stdout")
		}
		return l
	case <-time.After(waitFor):
		p.t.Fatal("no line from fake server")
	}
	return nil
}

// next returns the next message.
func (p *proc) next() msg {
	p.t.Helper()
	l := p.line()
	var m msg
	if err := json.Unmarshal(l, &m); err != nil {
		p.t.Fatalf("fake server wrote %q: %v", l, err)
	}
	return m
}

// response reads until the response with id and returns it with the messages before it.
func (p *proc) response(id string) (msg, []msg) {
	p.t.Helper()
	var before []msg
	for {
		m := p.next()
		if m.Method == "" && string(m.ID) == id {
			return m, before
		}
		before = append(before, m)
	}
}

// call sends a request and returns its response, failing on a JSON-RPC error.
func (p *proc) call(method, params string) json.RawMessage {
	p.t.Helper()
	m, _ := p.response(p.request(method, params))
	if m.Error != nil {
		p.t.Fatalf("%s: %v", method, m.Error)
	}
	return m.Result
}

// callTool calls a tool and decodes its result.
func (p *proc) callTool(name, args string) toolOutput {
	p.t.Helper()
	return decodeTool(p.t, p.call("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args)))
}

func (p *proc) initialize() {
	p.t.Helper()
	p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}`)
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// exitCode waits for the process to end and returns its exit code (-1 when signalled).
func (p *proc) exitCode() int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(waitFor):
		p.t.Fatal("fake server did not exit")
	}
	return 0
}

// assertQuiet checks that nothing is written for quietFor.
func (p *proc) assertQuiet() {
	p.t.Helper()
	select {
	case l, ok := <-p.stdout:
		if ok {
			p.t.Fatalf("unexpected line %q", l)
		}
	case <-time.After(quietFor):
	}
}

// assertRunning checks that the process has not exited within quietFor.
func (p *proc) assertRunning() {
	p.t.Helper()
	select {
	case <-p.exited:
		p.t.Fatalf("fake server exited: %v", p.cmd.ProcessState)
	case <-time.After(quietFor):
	}
}

// awaitStderr waits for a stderr line satisfying ok.
func (p *proc) awaitStderr(ok func(string) bool) {
	p.t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case l := <-p.stderr:
			if ok(l) {
				return
			}
		case <-deadline:
			p.t.Fatal("expected stderr line not seen")
		}
	}
}

type toolOutput struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]json.RawMessage `json:"structuredContent"`
	IsError           bool                       `json:"isError"`
}

func (o toolOutput) text() string {
	if len(o.Content) == 0 {
		return ""
	}
	return o.Content[0].Text
}

func decodeTool(t *testing.T, raw json.RawMessage) toolOutput {
	t.Helper()
	var o toolOutput
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("tool result %s: %v", raw, err)
	}
	return o
}

func field[T any](t *testing.T, o toolOutput, key string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(o.StructuredContent[key], &v); err != nil {
		t.Fatalf("structuredContent.%s = %s: %v", key, o.StructuredContent[key], err)
	}
	return v
}

func TestInitialize(t *testing.T) {
	tests := []struct {
		name         string
		args, env    []string
		asked        string
		wantVersion  string
		wantName     string
		wantCaps     []string
		instructions string
	}{
		{name: "latest", asked: "2025-11-25", wantVersion: "2025-11-25", wantName: "fakeserver", wantCaps: []string{"logging", "tools"}},
		{name: "older supported", asked: "2025-03-26", wantVersion: "2025-03-26", wantName: "fakeserver", wantCaps: []string{"logging", "tools"}},
		{name: "unknown version", asked: "2024-11-05", wantVersion: "2025-11-25", wantName: "fakeserver", wantCaps: []string{"logging", "tools"}},
		{name: "name and instructions", args: []string{"--name", "alpha", "--instructions", "be nice"}, asked: "2025-06-18",
			wantVersion: "2025-06-18", wantName: "alpha", instructions: "be nice", wantCaps: []string{"logging", "tools"}},
		{name: "name from environment", env: []string{"MCPGATE_FAKE_NAME=beta"}, asked: "2025-11-25", wantVersion: "2025-11-25", wantName: "beta", wantCaps: []string{"logging", "tools"}},
		{name: "resources and prompts", args: []string{"--resources", "2", "--prompts"}, asked: "2025-11-25", wantVersion: "2025-11-25", wantName: "fakeserver",
			wantCaps: []string{"completions", "logging", "prompts", "resources", "tools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.env, tt.args...)
			raw := p.call("initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"test","version":"1"}}`, tt.asked))
			var r struct {
				ProtocolVersion string                     `json:"protocolVersion"`
				Capabilities    map[string]json.RawMessage `json:"capabilities"`
				ServerInfo      struct{ Name string }      `json:"serverInfo"`
				Instructions    string                     `json:"instructions"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			var caps []string
			for k := range r.Capabilities {
				caps = append(caps, k)
			}
			slices.Sort(caps)
			if r.ProtocolVersion != tt.wantVersion || r.ServerInfo.Name != tt.wantName || r.Instructions != tt.instructions || !slices.Equal(caps, tt.wantCaps) {
				t.Errorf("initialize result %s; want version %s, name %s, instructions %q, capabilities %v",
					raw, tt.wantVersion, tt.wantName, tt.instructions, tt.wantCaps)
			}
		})
	}
}

func TestHandshakeBehaviours(t *testing.T) {
	const init = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}`
	t.Run("delayed result comes after a later ping", func(t *testing.T) {
		p := start(t, nil, "--handshake-delay", "1s")
		p.sendRequest("1", "initialize", init)
		p.sendRequest("2", "ping", "")
		if first := p.next(); string(first.ID) != "2" {
			t.Fatalf("first answer %s, want the ping's", first.ID)
		}
		if second := p.next(); string(second.ID) != "1" || second.Result == nil {
			t.Fatalf("second answer %+v, want the initialize result", second)
		}
	})
	t.Run("no initialize response", func(t *testing.T) {
		p := start(t, nil, "--no-initialize-response")
		p.sendRequest("1", "initialize", init)
		p.sendRequest("2", "ping", "")
		if m := p.next(); string(m.ID) != "2" {
			t.Fatalf("got %+v, want only the ping's answer", m)
		}
		p.assertQuiet()
	})
	t.Run("initialize barrier", func(t *testing.T) {
		record := filepath.Join(t.TempDir(), "shared.record")
		first := start(t, nil, "--record", record, "--initialize-barrier", "2")
		first.sendRequest("1", "initialize", init)
		first.sendRequest("2", "ping", "")
		if m := first.next(); string(m.ID) != "2" {
			t.Fatalf("first answer %+v, want the ping's: initialize waits for a second server", m)
		}
		second := start(t, nil, "--record", record, "--initialize-barrier", "2")
		second.sendRequest("1", "initialize", init)
		for i, p := range []*proc{first, second} {
			if m := p.next(); string(m.ID) != "1" || m.Result == nil {
				t.Fatalf("server %d: %+v, want the initialize result once both received initialize", i+1, m)
			}
		}
	})
	t.Run("list_changed before the result", func(t *testing.T) {
		p := start(t, nil, "--list-changed-before-init")
		p.sendRequest("1", "initialize", init)
		if m := p.next(); m.Method != "notifications/tools/list_changed" {
			t.Fatalf("first message %+v, want notifications/tools/list_changed", m)
		}
		if m := p.next(); string(m.ID) != "1" {
			t.Fatalf("second message %+v, want the initialize result", m)
		}
	})
}

func TestEchoReturnsIDAndMetaAsReceived(t *testing.T) {
	ids := []string{`7`, `-12`, `9007199254740993`, `"caf\u00e9"`, `"a<b>&c"`, `1.5e3`}
	p := start(t, nil)
	p.initialize()
	for _, id := range ids {
		const meta = `{"progressToken":"p\u00e9","x-custom":[1, 2]}`
		p.sendRequest(id, "tools/call", `{"name":"echo","arguments":{"text":"hi"},"_meta":`+meta+`}`)
		resp := p.line()
		wantPrefix := `{"jsonrpc":"2.0","id":` + id + `,"result":`
		if !bytes.HasPrefix(resp, []byte(wantPrefix)) {
			t.Fatalf("response %s does not start with %s", resp, wantPrefix)
		}
		var m msg
		if err := json.Unmarshal(resp, &m); err != nil {
			t.Fatal(err)
		}
		out := decodeTool(t, m.Result)
		if out.text() != "hi" || field[string](t, out, "rawId") != id || field[string](t, out, "rawMeta") != meta {
			t.Errorf("echo with id %s answered %s", id, m.Result)
		}
	}
}

func TestRequestsAreAnsweredOutOfOrder(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	p.sendRequest("100", "tools/call", `{"name":"slow","arguments":{"ms":60000}}`)
	p.sendRequest("101", "tools/call", `{"name":"echo","arguments":{"text":"fast"}}`)
	if m := p.next(); string(m.ID) != "101" {
		t.Fatalf("first answer %+v, want the echo's", m)
	}
}

func TestSlowAnswersAfterSleeping(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	if out := p.callTool("slow", `{"ms":20}`); out.text() != "slept 20 ms" {
		t.Errorf("slow answered %q", out.text())
	}
}

func TestListsArePaginated(t *testing.T) {
	p := start(t, nil, "--page-size", "2", "--tools", "a,b,c", "--resources", "5", "--prompts")
	p.initialize()
	tests := []struct {
		method, key string
		want        int
	}{
		{"tools/list", "tools", len(builtinTools()) + 3},
		{"resources/list", "resources", 5},
		{"resources/templates/list", "resourceTemplates", 1},
		{"prompts/list", "prompts", 1},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			var names []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("pagination does not end")
				}
				params := "{}"
				if cursor != "" {
					params = fmt.Sprintf(`{"cursor":%q}`, cursor)
				}
				var r map[string]json.RawMessage
				if err := json.Unmarshal(p.call(tt.method, params), &r); err != nil {
					t.Fatal(err)
				}
				var items []struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(r[tt.key], &items); err != nil {
					t.Fatal(err)
				}
				if len(items) > 2 {
					t.Fatalf("page of %d items, want at most 2", len(items))
				}
				for _, it := range items {
					names = append(names, it.Name)
				}
				cursor = ""
				if r["nextCursor"] != nil {
					json.Unmarshal(r["nextCursor"], &cursor)
				}
				if cursor == "" {
					break
				}
			}
			if len(names) != tt.want {
				t.Errorf("got %d items %v, want %d", len(names), names, tt.want)
			}
			if tt.key == "tools" && !slices.Equal(names[len(names)-3:], []string{"a", "b", "c"}) {
				t.Errorf("tools %v do not end with the extra tools", names)
			}
		})
	}
	m, _ := p.response(p.request("tools/list", `{"cursor":"bogus"}`))
	if m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("bad cursor answered %+v, want invalid params", m)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, method, params string
		wantCode             int
		wantMessage          string
	}{
		{"unknown method", "no/such", `{}`, codeMethodNotFound, "method not found: no/such"},
		{"unknown tool", "tools/call", `{"name":"nope"}`, codeInvalidParams, `unknown tool "nope"`},
		{"bad arguments", "tools/call", `{"name":"slow","arguments":{"ms":"long"}}`, codeInvalidParams, ""},
		{"error tool", "tools/call", `{"name":"error","arguments":{"code":-32001,"message":"nope"}}`, -32001, "nope"},
		{"prompts not enabled", "prompts/list", `{}`, codeMethodNotFound, ""},
	}
	p := start(t, nil)
	p.initialize()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := p.response(p.request(tt.method, tt.params))
			if m.Error == nil || m.Error.Code != tt.wantCode || (tt.wantMessage != "" && m.Error.Message != tt.wantMessage) {
				t.Errorf("got %+v, want error %d %q", m.Error, tt.wantCode, tt.wantMessage)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      []string
		calls    []string // tools called in order; all but the last must answer
		closeIn  bool
		wantCode int
		stderr   string
	}{
		{name: "stdin EOF", closeIn: true, wantCode: 0},
		{name: "exit at start", args: []string{"--exit-at-start", "7", "--stderr-at-start", "boom"}, wantCode: 7, stderr: "boom"},
		{name: "exit at start from environment", env: []string{"MCPGATE_FAKE_EXIT_AT_START=3"}, wantCode: 3},
		{name: "crash tool", calls: []string{`{"name":"crash","arguments":{"code":5}}`}, wantCode: 5},
		{name: "crash after two calls", args: []string{"--crash-after", "2", "--crash-code", "4"},
			calls: []string{`{"name":"echo"}`, `{"name":"pid"}`, `{"name":"echo"}`}, wantCode: 4},
		{name: "bad flag from environment", env: []string{"MCPGATE_FAKE_PAGE_SIZE=many"}, wantCode: 2, stderr: "MCPGATE_FAKE_PAGE_SIZE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.env, tt.args...)
			for i, c := range tt.calls {
				if i == len(tt.calls)-1 {
					p.request("tools/call", c)
					break
				}
				p.call("tools/call", c)
			}
			if tt.closeIn {
				p.stdin.Close()
			}
			if code := p.exitCode(); code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			if tt.stderr != "" {
				p.awaitStderr(func(l string) bool { return strings.Contains(l, tt.stderr) })
			}
		})
	}
}

func TestEOFFinishesRequestsInProgress(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	id := p.request("tools/call", `{"name":"slow","arguments":{"ms":100}}`)
	p.request("tools/call", `{"name":"wait_cancel"}`)
	p.stdin.Close()
	if m, _ := p.response(id); m.Result == nil {
		t.Errorf("slow answered %+v", m)
	}
	if code := p.exitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestStaysAliveWhenTold(t *testing.T) {
	t.Run("hang", func(t *testing.T) {
		p := start(t, nil)
		p.initialize()
		p.request("tools/call", `{"name":"hang"}`)
		p.request("ping", "")
		p.assertQuiet()
		p.stdin.Close()
		p.assertRunning()
	})
	t.Run("ignore EOF", func(t *testing.T) {
		p := start(t, nil, "--ignore-eof")
		p.initialize()
		p.stdin.Close()
		p.assertRunning()
	})
	t.Run("ignore SIGTERM", func(t *testing.T) {
		p := start(t, nil, "--ignore-sigterm")
		p.initialize()
		// An ignored signal is discarded when sent, so a later answer proves it was survived.
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.call("ping", "")
	})
	t.Run("SIGTERM kills by default", func(t *testing.T) {
		p := start(t, nil)
		p.initialize()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.exitCode()
		if ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGTERM {
			t.Errorf("process ended with %v, want SIGTERM", p.cmd.ProcessState)
		}
	})
}

func TestGarbage(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	id := p.request("tools/call", `{"name":"garbage","arguments":{"bytes":5000}}`)
	if l := p.line(); json.Valid(l) {
		t.Errorf("first line %q is valid JSON", l)
	}
	if l := p.line(); len(l) != 5000 || !json.Valid(l) {
		t.Errorf("second line has %d bytes (valid JSON %v), want 5000 of JSON", len(l), json.Valid(l))
	}
	if m := p.next(); string(m.ID) != "999999999" {
		t.Errorf("third message %+v, want a response with id 999999999", m)
	}
	if m := p.next(); string(m.ID) != id || m.Result == nil {
		t.Errorf("fourth message %+v, want the answer", m)
	}
}

func TestHuge(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	if out := p.callTool("huge", `{"bytes":3000000}`); len(out.text()) != 3000000 {
		t.Errorf("text of %d bytes, want 3000000", len(out.text()))
	}
}

func TestStderrSpam(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	p.callTool("stderr_spam", `{"lines":5000,"prefix":"noise"}`)
	seen := 0
	p.awaitStderr(func(l string) bool {
		if strings.HasPrefix(l, "noise ") {
			seen++
		}
		return seen == 5000
	})
}

func TestStderrWritesTextAsGiven(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	out := p.callTool("stderr", `{"text":"<3>first\nWARNING: second","repeat":2}`)
	if got := field[int](t, out, "bytes"); got != 2*len("<3>first\nWARNING: second\n") {
		t.Errorf("bytes = %d", got)
	}
	var want = []string{"<3>first", "WARNING: second", "<3>first", "WARNING: second"}
	for _, w := range want {
		p.awaitStderr(func(l string) bool { return l == w })
	}
	if got := field[int](t, p.callTool("stderr", `{}`), "bytes"); got != 1 {
		t.Errorf("empty text wrote %d bytes, want 1 (the newline)", got)
	}
}

// With lines -1, stderr_spam writes until its request is cancelled, and
// the server keeps serving meanwhile.
func TestStderrSpamUntilCancelled(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	p.sendRequest(`"spam"`, "tools/call", `{"name":"stderr_spam","arguments":{"lines":-1,"prefix":"flood"}}`)
	p.awaitStderr(func(l string) bool {
		n, err := strconv.Atoi(strings.TrimPrefix(l, "flood "))
		return err == nil && n >= 100000
	})
	if out := p.callTool("echo", `{"text":"meanwhile"}`); out.text() != "meanwhile" {
		t.Errorf("echo during the spam = %q", out.text())
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"spam"}}`)
	// stderr waits for the spam to release stderr, so its answer shows the
	// spam stopped.
	if out := p.callTool("stderr", `{"text":"after"}`); field[int](t, out, "bytes") != len("after\n") {
		t.Errorf("stderr after the spam answered %+v", out)
	}
	// The cancelled spam is not answered.
	p.assertQuiet()
}

func TestSetToolsNotifies(t *testing.T) {
	p := start(t, nil, "--tools", "old")
	p.initialize()
	_, before := p.response(p.request("tools/call", `{"name":"set_tools","arguments":{"names":["n1","n2"],"burst":3}}`))
	if len(before) != 3 {
		t.Fatalf("%d messages before the answer, want 3 list_changed", len(before))
	}
	for _, m := range before {
		if m.Method != "notifications/tools/list_changed" {
			t.Errorf("got %+v, want notifications/tools/list_changed", m)
		}
	}
	var r struct{ Tools []struct{ Name string } }
	json.Unmarshal(p.call("tools/list", "{}"), &r)
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names[len(names)-2:], []string{"n1", "n2"}) || slices.Contains(names, "old") {
		t.Errorf("tools after set_tools: %v", names)
	}
	if out := p.callTool("n1", "{}"); out.text() != "n1 ok" {
		t.Errorf("n1 answered %q", out.text())
	}
}

func TestProgress(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	_, before := p.response(p.request("tools/call", `{"name":"progress","arguments":{"steps":3},"_meta":{"progressToken":"tok"}}`))
	if len(before) != 3 {
		t.Fatalf("%d notifications, want 3", len(before))
	}
	for i, m := range before {
		var params struct {
			ProgressToken string `json:"progressToken"`
			Progress      int    `json:"progress"`
			Total         int    `json:"total"`
		}
		json.Unmarshal(m.Params, &params)
		if m.Method != "notifications/progress" || params.ProgressToken != "tok" || params.Progress != i+1 || params.Total != 3 {
			t.Errorf("notification %d: %s %s", i, m.Method, m.Params)
		}
	}
	_, before = p.response(p.request("tools/call", `{"name":"progress","arguments":{"steps":3}}`))
	if len(before) != 0 {
		t.Errorf("progress without a token sent %d notifications", len(before))
	}
}

func TestServerToClientRequests(t *testing.T) {
	tests := []struct {
		tool, args, wantMethod, wantID, answer string
		wantError                              bool
	}{
		{tool: "sample", args: `{}`, wantMethod: "sampling/createMessage", wantID: `"fakeserver-1"`,
			answer: `"result":{"role":"assistant","content":{"type":"text","text":"hello"},"model":"m"}`},
		{tool: "elicit", args: `{"id":42}`, wantMethod: "elicitation/create", wantID: `42`,
			answer: `"result":{"action":"decline"}`},
		{tool: "roots", args: `{"id":"r\u00e9"}`, wantMethod: "roots/list", wantID: `"r\u00e9"`,
			answer: `"error":{"code":-32601,"message":"no roots"}`, wantError: true},
		{tool: "request", args: `{"method":"x/custom","params":{"a":1}}`, wantMethod: "x/custom", wantID: `"fakeserver-1"`,
			answer: `"result":{"b":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			p := start(t, nil)
			p.initialize()
			id := p.request("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, tt.tool, tt.args))
			req := p.next()
			if req.Method != tt.wantMethod || string(req.ID) != tt.wantID {
				t.Fatalf("server sent %+v, want %s with id %s", req, tt.wantMethod, tt.wantID)
			}
			p.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,` + tt.answer + `}`)
			m, _ := p.response(id)
			out := decodeTool(t, m.Result)
			key := "result"
			if tt.wantError {
				key = "error"
			}
			want, _ := json.Marshal(json.RawMessage(strings.SplitN(tt.answer, ":", 2)[1]))
			if out.IsError != tt.wantError || string(out.StructuredContent[key]) != string(want) {
				t.Errorf("tool answered %s, want %s %s", m.Result, key, want)
			}
		})
	}
}

func TestNotifyAndLog(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	p.call("logging/setLevel", `{"level":"warning"}`)
	if out := p.callTool("loglevel", "{}"); out.text() != "warning" {
		t.Errorf("loglevel %q, want warning", out.text())
	}
	_, before := p.response(p.request("tools/call", `{"name":"log","arguments":{"level":"error","logger":"db","data":{"k":"v"}}}`))
	if len(before) != 1 || before[0].Method != "notifications/message" || string(before[0].Params) != `{"data":{"k":"v"},"level":"error","logger":"db"}` {
		t.Errorf("log sent %+v", before)
	}
	_, before = p.response(p.request("tools/call", `{"name":"notify","arguments":{"method":"x/ping","params":{"n":1}}}`))
	if len(before) != 1 || before[0].Method != "x/ping" || string(before[0].Params) != `{"n":1}` {
		t.Errorf("notify sent %+v", before)
	}
}

func TestCancellation(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	p.sendRequest(`"w1"`, "tools/call", `{"name":"wait_cancel"}`)
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w1","reason":"timeout"}}`)
	p.awaitStderr(func(l string) bool { return strings.Contains(l, "cancelled as expected") })
	m, before := p.response(p.request("tools/call", `{"name":"cancelled"}`))
	if len(before) != 0 {
		t.Errorf("wait_cancel answered: %+v", before)
	}
	out := decodeTool(t, m.Result)
	if got := string(out.StructuredContent["cancelled"]); got != `[{"requestId":"w1","reason":"timeout"}]` {
		t.Errorf("cancelled = %s", got)
	}
}

func TestResourcesAndPrompts(t *testing.T) {
	p := start(t, nil, "--resources", "3", "--prompts")
	p.initialize()

	var read struct{ Contents []struct{ URI, Text string } }
	json.Unmarshal(p.call("resources/read", `{"uri":"fake://r/1"}`), &read)
	if len(read.Contents) != 1 || read.Contents[0].Text != "contents of fake://r/1" {
		t.Errorf("read fake://r/1: %+v", read)
	}
	for _, uri := range []string{"fake://r/3", "fake://r/01", "other://x"} {
		if m, _ := p.response(p.request("resources/read", fmt.Sprintf(`{"uri":%q}`, uri))); m.Error == nil || m.Error.Code != codeResourceNotFound {
			t.Errorf("read %s: %+v, want resource not found", uri, m)
		}
	}

	p.call("resources/subscribe", `{"uri":"fake://r/0"}`)
	m, before := p.response(p.request("tools/call", `{"name":"touch","arguments":{"uri":"fake://r/0"}}`))
	if len(before) != 1 || before[0].Method != "notifications/resources/updated" || string(before[0].Params) != `{"uri":"fake://r/0"}` {
		t.Errorf("touch sent %+v", before)
	}
	if !field[bool](t, decodeTool(t, m.Result), "subscribed") {
		t.Error("touch does not see the subscription")
	}
	p.call("resources/unsubscribe", `{"uri":"fake://r/0"}`)
	if field[bool](t, p.callTool("touch", `{"uri":"fake://r/0"}`), "subscribed") {
		t.Error("touch still sees the subscription after unsubscribe")
	}

	var prompt struct {
		Messages []struct{ Content struct{ Text string } }
	}
	json.Unmarshal(p.call("prompts/get", `{"name":"greet","arguments":{"name":"Bob"}}`), &prompt)
	if len(prompt.Messages) != 1 || prompt.Messages[0].Content.Text != "Hello, Bob!" {
		t.Errorf("prompts/get greet: %+v", prompt)
	}
	var completion struct{ Completion struct{ Values []string } }
	json.Unmarshal(p.call("completion/complete", `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"name","value":"al"}}`), &completion)
	if !slices.Equal(completion.Completion.Values, []string{"Alan", "Alice"}) {
		t.Errorf("completion of al: %v", completion.Completion.Values)
	}
}

func TestRecordKeepsEveryLineByteForByte(t *testing.T) {
	file := filepath.Join(t.TempDir(), "record")
	p := start(t, nil, "--record", file)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{ "jsonrpc" : "2.0", "id" : "caf\u00e9", "method" : "ping" }`,
		`not json at all`,
	}
	for _, l := range lines {
		p.send(l)
	}
	p.stdin.Close()
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(lines, "\n") + "\n"; string(got) != want {
		t.Errorf("record file:\n%s\nwant:\n%s", got, want)
	}
}

func TestPID(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	out := p.callTool("pid", "{}")
	pid := p.cmd.Process.Pid
	if field[int](t, out, "pid") != pid || field[int](t, out, "pgid") != pid || field[int](t, out, "ppid") != os.Getpid() {
		t.Errorf("pid answered %s; process %d, test %d", out.StructuredContent, pid, os.Getpid())
	}
}

func TestPIDCountIsPerProcess(t *testing.T) {
	a, b := start(t, nil), start(t, nil)
	a.initialize()
	b.initialize()
	for i, p := range []*proc{a, a, b, a} {
		want := []int{1, 2, 1, 3}[i]
		out := p.callTool("pid", "{}")
		if field[int](t, out, "count") != want || field[int](t, out, "pid") != p.cmd.Process.Pid {
			t.Errorf("call %d: pid answered %s, want count %d from pid %d", i, out.StructuredContent, want, p.cmd.Process.Pid)
		}
	}
}

func TestGrandchildren(t *testing.T) {
	tests := []struct {
		name string
		args string
	}{
		{"direct", `{}`},
		{"double fork", `{"double_fork":true}`},
		{"ignoring SIGTERM", `{"ignore_sigterm":true}`},
	}
	// Orphans become the test's children, so it can check the reparenting
	// and await their death with wait4.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, nil)
			p.initialize()
			out := p.callTool("spawn_grandchild", tt.args)
			pid, pgid := field[int](t, out, "pid"), field[int](t, out, "pgid")
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // in case it left the group
			if pgid != p.cmd.Process.Pid {
				t.Errorf("grandchild %d in group %d, want %d", pid, pgid, p.cmd.Process.Pid)
			}

			p.stdin.Close()
			if code := p.exitCode(); code != 0 {
				t.Errorf("fake server exit code %d, want 0", code)
			}
			if ppid, err := parentOf(pid); err != nil || ppid != os.Getpid() {
				t.Fatalf("grandchild %d has parent %d (%v), want it alive and reparented to the test %d", pid, ppid, err, os.Getpid())
			}
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill group %d: %v", pgid, err)
			}
			reaped := make(chan syscall.WaitStatus, 1)
			go func() {
				var ws syscall.WaitStatus
				syscall.Wait4(pid, &ws, 0, nil)
				reaped <- ws
			}()
			select {
			case ws := <-reaped:
				if ws.Signal() != syscall.SIGKILL {
					t.Errorf("grandchild ended with %v, want SIGKILL", ws)
				}
			case <-time.After(waitFor):
				t.Fatalf("grandchild %d survived SIGKILL of its group", pid)
			}
		})
	}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// parentOf returns the parent PID of a live (not zombie) process.
func parentOf(pid int) (int, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// State and parent PID follow the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat %q", pid, stat)
	}
	var state string
	var ppid int
	if _, err := fmt.Sscan(string(stat[i+1:]), &state, &ppid); err != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	if state == "Z" {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return ppid, nil
}

// TestGrandchildSetsid: a grandchild started with setsid leaves the
// server's process group, as servers that daemonize do.
func TestGrandchildSetsid(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	out := p.callTool("spawn_grandchild", `{"setsid":true}`)
	pid, pgid := field[int](t, out, "pid"), field[int](t, out, "pgid")
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if pgid != pid || pgid == p.cmd.Process.Pid {
		t.Errorf("grandchild %d in group %d, want a group of its own", pid, pgid)
	}
}

// TestDial: dial connects, and says why when it cannot.
func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	p := start(t, nil)
	p.initialize()
	if out := p.callTool("dial", fmt.Sprintf(`{"address":%q}`, addr)); out.IsError || out.Content[0].Text != "connected to "+addr {
		t.Errorf("dial %s: %+v", addr, out)
	}
	ln.Close()
	if out := p.callTool("dial", fmt.Sprintf(`{"address":%q}`, addr)); !out.IsError || !strings.Contains(out.Content[0].Text, "connection refused") {
		t.Errorf("dial %s after close: %+v", addr, out)
	}
}

// TestAllocate: allocate holds what it allocated.
func TestAllocate(t *testing.T) {
	p := start(t, nil)
	p.initialize()
	if out := p.callTool("allocate", `{"mib":2}`); out.IsError || out.Content[0].Text != "holding 2 MiB" {
		t.Errorf("allocate 2: %+v", out)
	}
	if out := p.callTool("allocate", `{"mib":1}`); out.Content[0].Text != "holding 3 MiB" {
		t.Errorf("allocate 1 more: %+v", out)
	}
}

// TestToolsFile: --tools-file tools are listed exactly as written and
// answer "NAME ok".
func TestToolsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tools.json")
	tool := `{"name":"search","description":"Searches.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`
	if err := os.WriteFile(file, []byte("["+tool+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, "--tools-file", file)
	p.initialize()
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(p.call("tools/list", `{}`), &list); err != nil {
		t.Fatal(err)
	}
	if last := list.Tools[len(list.Tools)-1]; string(last) != tool {
		t.Errorf("last listed tool %s, want %s as written", last, tool)
	}
	if out := p.callTool("search", `{}`); out.text() != "search ok" {
		t.Errorf("search answered %+v", out)
	}
}
