package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// itestSession is an MCP session over plain HTTP with a bearer token.
type itestSession struct {
	t        *testing.T
	url      string
	hc       *http.Client
	id       string
	protocol string
}

// rawSessionOf initializes a session of the client with token.
func rawSessionOf(t *testing.T, url, token, protocol string) *itestSession {
	t.Helper()
	s := &itestSession{t: t, url: url, hc: tokenClient(token), protocol: protocol}
	resp, body := exchange(t, s.hc, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"hostile","version":"1"}}}`, protocol))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: HTTP %d: %s", resp.StatusCode, body)
	}
	s.id = resp.Header.Get("Mcp-Session-Id")
	s.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// post sends body in the session and returns the status and the messages
// of the answer, plain JSON or an event stream.
func (s *itestSession) post(body string) (int, []rpcMessage) {
	s.t.Helper()
	resp, text := exchange(s.t, s.hc, s.url, body, "Mcp-Session-Id", s.id, "MCP-Protocol-Version", s.protocol)
	var msgs []rpcMessage
	var chunks []string
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(text, "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(data) != "" {
				chunks = append(chunks, data)
			}
		}
	} else if strings.TrimSpace(text) != "" {
		chunks = append(chunks, text)
	}
	for _, c := range chunks {
		var one rpcMessage
		var batch []rpcMessage
		switch {
		case json.Unmarshal([]byte(c), &batch) == nil:
			msgs = append(msgs, batch...)
		case json.Unmarshal([]byte(c), &one) == nil:
			msgs = append(msgs, one)
		default:
			s.t.Fatalf("answer to %s is not JSON-RPC: %q", body, text)
		}
	}
	return resp.StatusCode, msgs
}

// notify posts a notification and expects 202.
func (s *itestSession) notify(body string) {
	s.t.Helper()
	if status, msgs := s.post(body); status != http.StatusAccepted {
		s.t.Fatalf("posting %s: HTTP %d, want 202: %+v", body, status, msgs)
	}
}

// get opens a GET stream with headers and returns its status; the stream
// is closed at once.
func (s *itestSession) get(headers ...string) int {
	s.t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(s.t, 30*time.Second), http.MethodGet, s.url, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("MCP-Protocol-Version", s.protocol)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// awaitLines waits until a fakeserver's --record file has a line with
// marker, and returns every line.
func awaitLines(t *testing.T, path, marker string) []string {
	t.Helper()
	var lines []string
	testutil.Eventually(t, 30*time.Second, "a line with "+marker+" in "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		lines = strings.Split(strings.TrimSpace(string(data)), "\n")
		return bytes.Contains(data, []byte(marker))
	})
	return lines
}

// The policy of the hostile client: one tool, one prompt, one resource of
// backend py, nothing of backend secret.
const hostileToken = "mcpgate_itest_hostile_0123456789"

// hostileRow is one message a client with a narrow policy sends, and what
// it must get.
type hostileRow struct {
	name string
	old  bool   // sent in a 2025-03-26 session (batches)
	body string // a POST body; "GET Last-Event-ID: X" resumes a stream
	want string // "ok" (results), "error" (errors), "invalid" (-32600), "accepted" (202), "any"
}

func hostileRows() []hostileRow {
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":"ID","method":"tools/call","params":` + params + `}`
	}
	req := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":"ID","method":"` + method + `","params":` + params + `}`
	}
	note := func(method, params string) string {
		return `{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`
	}
	complete := func(ref string) string {
		return req("completion/complete", `{"ref":`+ref+`,"argument":{"name":"name","value":"a"}}`)
	}
	return []hostileRow{
		// Allowed, as a baseline: these must reach py.
		{name: "allowed tool", body: call(`{"name":"py__read","arguments":{}}`), want: "ok"},
		{name: "allowed tool, name escaped", body: call(`{"name":"py\u005f_read"}`), want: "ok"},
		{name: "allowed tool, forbidden name in arguments", body: call(`{"name":"py__read","arguments":{"name":"py__delete_everything"}}`), want: "ok"},
		{name: "allowed prompt", body: req("prompts/get", `{"name":"py__greet","arguments":{"name":"x"}}`), want: "ok"},
		{name: "allowed resource", body: req("resources/read", `{"uri":"fake://r/0"}`), want: "ok"},
		{name: "allowed completion", body: complete(`{"type":"ref/prompt","name":"py__greet"}`), want: "ok"},
		// Duplicate members, at every level the gateway reads.
		{name: "name twice, forbidden last", body: call(`{"name":"py__read","name":"py__delete_everything"}`), want: "invalid"},
		{name: "name twice, forbidden first", body: call(`{"name":"py__delete_everything","name":"py__read"}`), want: "invalid"},
		{name: "name twice, other backend", body: call(`{"name":"py__read","name":"secret__delete_everything"}`), want: "invalid"},
		{name: "name twice around arguments", body: call(`{"name":"py__read","arguments":{},"name":"py__delete_everything"}`), want: "invalid"},
		{name: "name and Name", body: call(`{"name":"py__read","Name":"py__delete_everything"}`), want: "invalid"},
		{name: "name and NAME", body: call(`{"NAME":"py__delete_everything","name":"py__read"}`), want: "invalid"},
		{name: "name and escaped name", body: call(`{"name":"py__read","na\u006de":"py__delete_everything"}`), want: "invalid"},
		{name: "params twice", body: `{"jsonrpc":"2.0","id":"ID","method":"tools/call","params":{"name":"py__read"},"params":{"name":"py__delete_everything"}}`, want: "invalid"},
		{name: "params and Params", body: `{"jsonrpc":"2.0","id":"ID","method":"tools/call","params":{"name":"py__read"},"Params":{"name":"py__delete_everything"}}`, want: "invalid"},
		{name: "method twice", body: `{"jsonrpc":"2.0","id":"ID","method":"tools/list","method":"tools/call","params":{"name":"py__delete_everything"}}`, want: "invalid"},
		{name: "method and Method", body: `{"jsonrpc":"2.0","id":"ID","method":"tools/call","Method":"resources/read","params":{"name":"py__read","uri":"fake://r/1"}}`, want: "invalid"},
		{name: "id twice", body: `{"jsonrpc":"2.0","id":"ID","id":"other","method":"tools/call","params":{"name":"py__read"}}`, want: "invalid"},
		{name: "progress token twice", body: call(`{"name":"py__read","_meta":{"progressToken":1,"progressToken":2}}`), want: "invalid"},
		{name: "_meta twice", body: call(`{"name":"py__read","_meta":{"progressToken":1},"_meta":{"progressToken":2}}`), want: "invalid"},
		{name: "progress token in another case", body: call(`{"name":"py__read","_meta":{"progreſſToken":3}}`), want: "invalid"},
		{name: "prompt name twice", body: req("prompts/get", `{"name":"py__greet","name":"secret__greet"}`), want: "invalid"},
		{name: "uri twice", body: req("resources/read", `{"uri":"fake://r/0","uri":"fake://r/1"}`), want: "invalid"},
		{name: "uri and URI", body: req("resources/read", `{"uri":"fake://r/0","URI":"fake://r/1"}`), want: "invalid"},
		{name: "subscribe uri twice", body: req("resources/subscribe", `{"uri":"fake://r/0","uri":"fake://r/1"}`), want: "invalid"},
		{name: "completion ref twice", body: complete(`{"type":"ref/prompt","name":"py__greet"},"ref":{"type":"ref/prompt","name":"secret__greet"}`), want: "invalid"},
		{name: "completion ref name twice", body: complete(`{"type":"ref/prompt","name":"py__greet","name":"secret__greet"}`), want: "invalid"},
		{name: "completion ref type twice", body: complete(`{"type":"ref/prompt","type":"ref/resource","name":"py__greet","uri":"fake://r/1"}`), want: "invalid"},
		{name: "list cursor twice", body: req("tools/list", `{"cursor":"a","cursor":"b"}`), want: "invalid"},
		{name: "setLevel level twice", body: req("logging/setLevel", `{"level":"error","level":"debug"}`), want: "invalid"},
		// Look-alikes, case variants, the separator inside names.
		{name: "tool in capitals", body: call(`{"name":"PY__READ"}`), want: "error"},
		{name: "tool name in another case", body: call(`{"name":"py__Read"}`), want: "error"},
		{name: "tool with a Cyrillic a", body: call(`{"name":"py__reаd"}`), want: "error"},
		{name: "tool with a zero-width space", body: call(`{"name":"py__read\u200b"}`), want: "error"},
		{name: "tool with a trailing space", body: call(`{"name":"py__read "}`), want: "error"},
		{name: "tool with a NUL", body: call(`{"name":"py__read\u0000"}`), want: "error"},
		{name: "separator inside the name", body: call(`{"name":"py__secret__delete_everything"}`), want: "error"},
		{name: "other backend's tool", body: call(`{"name":"secret__read"}`), want: "error"},
		{name: "forbidden tool, escaped", body: call(`{"name":"py_\u005fdelete_everything"}`), want: "error"},
		{name: "tool name not a string", body: call(`{"name":["py__read"]}`), want: "error"},
		{name: "prompt in capitals", body: req("prompts/get", `{"name":"PY__GREET"}`), want: "error"},
		{name: "other backend's prompt", body: req("prompts/get", `{"name":"secret__greet"}`), want: "error"},
		{name: "resource in another case", body: req("resources/read", `{"uri":"FAKE://r/0"}`), want: "error"},
		{name: "forbidden resource", body: req("resources/read", `{"uri":"fake://r/1"}`), want: "error"},
		{name: "subscribe to a forbidden resource", body: req("resources/subscribe", `{"uri":"fake://r/1"}`), want: "error"},
		{name: "unsubscribe from a forbidden resource", body: req("resources/unsubscribe", `{"uri":"fake://r/1"}`), want: "ok"},
		{name: "complete a forbidden prompt", body: complete(`{"type":"ref/prompt","name":"secret__greet"}`), want: "error"},
		{name: "complete a forbidden resource", body: complete(`{"type":"ref/resource","uri":"fake://r/1"}`), want: "error"},
		{name: "unknown method", body: req("secret/delete", `{}`), want: "error"},
		{name: "method in another case", body: req("Tools/Call", `{"name":"py__delete_everything"}`), want: "error"},
		{name: "method with a trailing space", body: req("tools/call ", `{"name":"py__delete_everything"}`), want: "error"},
		// Notifications.
		{name: "unknown notification", body: note("notifications/secret", `{"name":"secret__delete_everything"}`), want: "accepted"},
		{name: "cancel with requestId twice", body: note("notifications/cancelled", `{"requestId":1,"requestId":2}`), want: "accepted"},
		{name: "roots changed", body: note("notifications/roots/list_changed", `{}`), want: "accepted"},
		{name: "setLevel reaches only visible backends", body: req("logging/setLevel", `{"level":"debug"}`), want: "ok"},
		// Batches, which only 2025-03-26 sessions may send.
		{name: "batch of an allowed and a forbidden call", old: true, want: "any",
			body: `[` + call(`{"name":"py__read"}`) + `,` + strings.Replace(call(`{"name":"py__delete_everything"}`), `"ID"`, `"ID-2"`, 1) + `]`},
		{name: "batch with a duplicate member", old: true, want: "any",
			body: `[` + call(`{"name":"py__read","name":"py__delete_everything"}`) + `]`},
		{name: "batch with a duplicate member in a notification", old: true, want: "any",
			body: `[` + note("notifications/secret", `{}`) + `,` + req("resources/read", `{"uri":"fake://r/0","uri":"fake://r/1"}`) + `]`},
		{name: "batch in a 2025-11-25 session", want: "any", body: `[` + call(`{"name":"py__delete_everything"}`) + `]`},
		// Resumed streams that belong to nothing of this session.
		{name: "resume an unknown stream", body: "GET Last-Event-ID: 999-1", want: "any"},
		{name: "resume with a malformed event id", body: "GET Last-Event-ID: x-y", want: "any"},
	}
}

// The proof of issue 21's first class of defects: a client with a narrow
// policy sends messages built to confuse routing and the policy; the
// backends record every line they read. No backend ever receives a
// method, tool, prompt or URI the policy does not allow, every reading of
// what they received (first member, last member, any case) agrees, and the
// audit entries match what the backend received.
func TestHostileMessagesNeverReachWhatThePolicyForbids(t *testing.T) {
	bins := testutil.Build(t)
	dir := t.TempDir()
	pyRecord, secretRecord := dir+"/py.record", dir+"/secret.record"
	backends := fmt.Sprintf(`
[backends.py]
command = %[1]q
args = ["--name", "py", "--tools", "read,delete_everything", "--prompts", "--resources", "2", "--record", %[2]q]

[backends.secret]
command = %[1]q
args = ["--name", "secret", "--tools", "read,delete_everything", "--prompts", "--record", %[3]q]

[clients.full]
token_sha256 = %[4]q

[clients.hostile]
token_sha256 = %[5]q
tools = ["py__read"]
prompts = ["py__greet"]
resources = ["fake://r/0"]
`, bins.Fake, pyRecord, secretRecord, sha256Hex(fullToken), sha256Hex(hostileToken))
	toml, url := testutil.ConfigWith(t, backends, testutil.ConfigOptions{Auth: "required"})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{})
	current := rawSessionOf(t, d.URL, hostileToken, "2025-11-25")
	old := rawSessionOf(t, d.URL, hostileToken, "2025-03-26")

	rows := hostileRows()
	if len(rows) < 40 {
		t.Fatalf("%d hostile messages; the proof asks for at least 40", len(rows))
	}
	for i, row := range rows {
		s := current
		if row.old {
			s = old
		}
		if header, ok := strings.CutPrefix(row.body, "GET Last-Event-ID: "); ok {
			if status := s.get("Last-Event-ID", header); status >= 500 {
				t.Errorf("%s: HTTP %d", row.name, status)
			}
			continue
		}
		body := strings.ReplaceAll(row.body, `"ID`, fmt.Sprintf(`"r%d`, i))
		status, msgs := s.post(body)
		switch row.want {
		case "accepted":
			if status != http.StatusAccepted {
				t.Errorf("%s: HTTP %d, want 202", row.name, status)
			}
		case "ok", "error", "invalid":
			if len(msgs) == 0 {
				t.Errorf("%s: HTTP %d and no answer", row.name, status)
				continue
			}
			m := msgs[len(msgs)-1]
			switch {
			case row.want == "ok" && m.Error != nil:
				t.Errorf("%s: error %d %q, want a result", row.name, m.Error.Code, m.Error.Message)
			case row.want != "ok" && m.Error == nil:
				t.Errorf("%s: result %s, want an error", row.name, m.Result)
			case row.want == "invalid" && (m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "more than once") && !strings.Contains(m.Error.Message, "only in case")):
				t.Errorf("%s: error %d %q, want -32600 naming the ambiguous member", row.name, m.Error.Code, m.Error.Message)
			}
		}
	}

	// A client that may use everything marks the end of both records.
	full := rawSessionOf(t, d.URL, fullToken, "2025-11-25")
	for _, tool := range []string{"py__echo", "secret__echo"} {
		if _, msgs := full.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"end-of-hostile-run"}}}`); len(msgs) == 0 || msgs[len(msgs)-1].Error != nil {
			t.Fatalf("the closing call of %s failed: %+v", tool, msgs)
		}
	}
	lifecycle := []string{"server/discover", "initialize", "notifications/initialized", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "ping"}
	received := map[string]int{} // "method name" → how many times py received it
	for _, backend := range []string{"py", "secret"} {
		path := map[string]string{"py": pyRecord, "secret": secretRecord}[backend]
		for _, line := range awaitLines(t, path, "end-of-hostile-run") {
			if strings.Contains(line, "end-of-hostile-run") {
				continue
			}
			method, target := readAll(t, backend, line)
			switch {
			case slices.Contains(lifecycle, method):
			case backend == "secret":
				t.Errorf("secret, which the client may not see, received %s", line)
			case !allowedAtPy(method, target):
				t.Errorf("py received %s %q, which the policy does not allow: %s", method, target, line)
			default:
				received[method+" "+target]++
			}
		}
	}
	if received["tools/call read"] == 0 || received["prompts/get greet"] == 0 || received["resources/read fake://r/0"] == 0 {
		t.Errorf("the allowed baseline did not reach py: %v", received)
	}

	// Every audit entry of the client names what py received, as often.
	audited := map[string]int{}
	want := received["tools/call read"] + received["prompts/get greet"] + received["resources/read fake://r/0"]
	entry := regexp.MustCompile(`msg="audit: hostile (\S+) (\S+): \w+"`)
	d.Stderr.Await(t, 30*time.Second, fmt.Sprintf("%d audit entries of the client", want), func(out string) bool {
		return len(entry.FindAllString(out, -1)) >= want
	})
	for _, m := range entry.FindAllStringSubmatch(d.Stderr.String(), -1) {
		audited[m[1]+" "+strings.TrimPrefix(strings.TrimPrefix(m[2], "py__"), "secret__")]++
	}
	for _, what := range []string{"tools/call read", "prompts/get greet", "resources/read fake://r/0"} {
		if audited[what] != received[what] {
			t.Errorf("%s: %d audit entries, py received it %d times", what, audited[what], received[what])
		}
	}
	if len(audited) > 3 {
		t.Errorf("audit entries name something py never received: %v (py received %v)", audited, received)
	}
}

// readAll reads a line a backend received as servers do, and fails the
// test when two readings disagree: the first member or the last, a name
// exactly spelled or in any case. It returns the method and the name or
// URI the message acts on.
func readAll(t *testing.T, backend, line string) (method, target string) {
	t.Helper()
	var exact struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	var folded struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
			Ref  struct {
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"ref"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(line), &exact); err != nil {
		t.Fatalf("%s received a line that is no JSON-RPC message: %s", backend, line)
	}
	json.Unmarshal([]byte(line), &folded)
	str := func(raw json.RawMessage) string {
		var s string
		json.Unmarshal(raw, &s)
		return s
	}
	target = str(exact.Params["name"]) + str(exact.Params["uri"])
	foldedTarget := folded.Params.Name + folded.Params.URI
	if ref, ok := exact.Params["ref"]; ok {
		var r map[string]json.RawMessage
		json.Unmarshal(ref, &r)
		target = str(r["name"]) + str(r["uri"])
		foldedTarget = folded.Params.Ref.Name + folded.Params.Ref.URI
	}
	if exact.Method != folded.Method || target != foldedTarget || firstMembersDiffer(line) {
		t.Errorf("%s received a message servers read differently: %s", backend, line)
	}
	return exact.Method, target
}

// firstMembersDiffer reports whether any object in line has a member name
// twice, in any case: a parser keeping the first reads something else.
func firstMembersDiffer(line string) bool {
	dec := json.NewDecoder(strings.NewReader(line))
	type object struct{ names map[string]bool }
	var stack []*object
	expectName := func() bool {
		return len(stack) > 0 && stack[len(stack)-1] != nil
	}
	afterName := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			afterName = false
			switch v {
			case '{':
				stack = append(stack, &object{names: map[string]bool{}})
			case '[':
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if expectName() && !afterName {
				key := strings.ToLower(v)
				if stack[len(stack)-1].names[key] {
					return true
				}
				stack[len(stack)-1].names[key] = true
				afterName = true
				continue
			}
		}
		afterName = false
	}
}

// allowedAtPy reports whether the hostile client's policy allows what py
// received: its tool read, prompt greet, resource fake://r/0, and what
// routing sends on its own (log level, cancellations, roots).
func allowedAtPy(method, target string) bool {
	switch method {
	case "tools/call":
		return target == "read"
	case "prompts/get":
		return target == "greet"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return target == "fake://r/0"
	case "completion/complete":
		return target == "greet" || target == "fake://r/0"
	case "logging/setLevel", "notifications/cancelled", "notifications/roots/list_changed":
		return true
	}
	return false
}
