package itest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// The hostile remote server's numbers: the daemon reads messages of at
// most hostileLimit bytes; each attack sends hostileAttack bytes, far more.
const (
	hostileLimit  = 1 << 20
	hostileAttack = 96 << 20
	// hostileRSSBound is how much more the daemon may hold at its peak than
	// before the attacks: generous (streams, buffers, the garbage
	// collector's slack), and still a third of one attack.
	hostileRSSBound = 32 * hostileLimit
)

// liar is a remote MCP server that lies in every way the tests below
// name, on these paths: /mcp (Streamable HTTP), /sse (the legacy
// transport, endpoint /messages) and /sse-elsewhere (whose endpoint event
// names another origin).
type liar struct {
	other   string      // a URL of another origin
	get     chan string // events for the open GET stream
	legacy  chan string // events for the open legacy stream
	dripped atomic.Int32
}

// bystander is a server of another origin: it counts the requests it
// gets and those that carry a credential header.
type bystander struct {
	requests, credentials atomic.Int32
}

func (b *bystander) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.requests.Add(1)
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Authorization") != "" {
		b.credentials.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
}

func (l *liar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		events := l.get
		switch r.URL.Path {
		case "/sse":
			io.WriteString(w, "event: endpoint\ndata: /messages\n\n")
			events = l.legacy
		case "/sse-elsewhere":
			fmt.Fprintf(w, "event: endpoint\ndata: %s/messages\n\n", l.other)
			events = nil
		}
		w.(http.Flusher).Flush()
		for {
			select {
			case ev := <-events:
				if id, ok := strings.CutPrefix(ev, "huge"); ok {
					writeHuge(w, strings.TrimPrefix(id, ":"))
					io.WriteString(w, "\n")
					ev = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"after\"}}\n\n"
				}
				if _, err := io.WriteString(w, ev); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil || !msg.IsRequest() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if r.URL.Path == "/messages" {
			w.WriteHeader(http.StatusAccepted)
			if liarTool(msg) == "huge" {
				l.legacy <- "huge:" + string(msg.ID) // its id first, then too much
				return
			}
			l.legacy <- "data: " + liarAnswer(msg) + "\n\n"
			return
		}
		l.post(w, r, msg)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func liarTool(msg *jsonrpc.Message) string {
	name, _, _ := jsonrpc.LookupPath(msg.Params, "name")
	s, _ := jsonrpc.StringValue(name)
	return s
}

func liarAnswer(msg *jsonrpc.Message) string {
	result := `{}`
	switch msg.Method {
	case "initialize":
		result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"liar","version":"1"}}`
	case "tools/list":
		var tools []string
		for _, name := range []string{"echo", "huge", "many-lines", "huge-json", "endless", "drip", "bad-utf8", "stranger-id", "redirect", "flood-stream"} {
			tools = append(tools, `{"name":"`+name+`","inputSchema":{"type":"object"}}`)
		}
		result = `{"tools":[` + strings.Join(tools, ",") + `]}`
	case "tools/call":
		result = `{"content":[{"type":"text","text":"fine"}]}`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
}

// writeHuge writes one data line of a response with id first and
// hostileAttack bytes of text, without the event's end; false if the
// client went away.
func writeHuge(w io.Writer, id string) bool {
	if id == "" {
		id = "999999"
	}
	if _, err := fmt.Fprintf(w, `data: {"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id); err != nil {
		return false
	}
	chunk := strings.Repeat("x", 64<<10)
	for n := 0; n < hostileAttack; n += len(chunk) {
		if _, err := io.WriteString(w, chunk); err != nil {
			return false
		}
	}
	_, err := io.WriteString(w, "\"}]}}\n")
	return err == nil
}

func (l *liar) post(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	sse := func() {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	id := string(msg.ID)
	line := "data: " + strings.Repeat("y", 60<<10) + "\n"
	switch liarTool(msg) {
	case "huge": // one event, one line
		sse()
		if writeHuge(w, id) {
			io.WriteString(w, "\n")
		}
	case "many-lines": // one event of many data lines
		sse()
		for n := 0; n < hostileAttack; n += len(line) {
			if _, err := io.WriteString(w, line); err != nil {
				return
			}
		}
		io.WriteString(w, "\n")
	case "huge-json":
		w.Header().Set("Content-Type", "application/json")
		writeHuge(w, id)
	case "endless": // data lines, and never the blank line that ends the event
		sse()
		for n := 0; n < hostileAttack; n += len(line) {
			if _, err := io.WriteString(w, line); err != nil {
				return
			}
		}
		<-r.Context().Done()
	case "drip": // a byte at a time, until the client gives up
		sse()
		for {
			if _, err := io.WriteString(w, "y"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			l.dripped.Add(1)
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	case "bad-utf8":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe\xc3( here\"}]}}", id)
	case "stranger-id": // answers to requests never sent, then the real answer
		sse()
		for _, stranger := range []string{"987654", `"not-ours"`, "-1", "null"} {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"stranger\"}]}}\n\n", stranger)
		}
		io.WriteString(w, "data: "+liarAnswer(msg)+"\n\n")
	case "redirect":
		http.Redirect(w, r, l.other+"/mcp", http.StatusTemporaryRedirect)
	case "flood-stream": // too much on the GET stream, then the answer
		l.get <- "huge"
		l.get <- "huge"
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, liarAnswer(msg))
	default:
		if msg.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "liar-1")
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, liarAnswer(msg))
	}
}

// vm returns a field of /proc/PID/status in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// A remote server that lies in every way it can: answers far larger than
// max_message_bytes (one line, many lines, a JSON body, on the GET stream
// and the legacy stream), an event that never ends, a slow drip, invalid
// UTF-8, answers to ids never sent, a redirect and an endpoint to another
// origin. The real daemon fails what must fail, keeps serving its other
// backends and the liar's honest tools, holds no more memory than a small
// multiple of the limit, and sends no credential to the other origin.
func TestHostileRemoteServer(t *testing.T) {
	other := &bystander{}
	ots := httptest.NewServer(other)
	t.Cleanup(ots.Close)
	l := &liar{other: ots.URL, get: make(chan string, 4), legacy: make(chan string, 4)}
	ts := httptest.NewServer(l)
	t.Cleanup(ts.Close)

	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "key"), []byte("k3y-for-the-liar-only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bins := testutil.BuildWithoutRace(t) // its memory is what is measured
	headers := `headers = { X-Api-Key = "${credential:key}", Authorization = "Bearer ${credential:key}" }`
	toml, url := testutil.Config(t, fmt.Sprintf(`
[backends.good]
command = %[1]q

[backends.liar]
url = "%[2]s/mcp"
%[3]s
timeout = "3s"

[backends.legacy]
url = "%[2]s/sse"
transport = "sse"
%[3]s

[backends.elsewhere]
url = "%[2]s/sse-elsewhere"
transport = "sse"
%[3]s
max_restarts = 0
timeout = "2s"
`, bins.Fake, ts.URL, headers))
	toml = strings.Replace(toml, "[gateway]\n", fmt.Sprintf("[gateway]\nmax_message_bytes = %d\ncredentials_directory = %q\n", hostileLimit, creds), 1)
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{WithoutRace: true})
	cs := d.Connect(t, nil)
	testutil.Eventually(t, wait, "the liar's and the legacy tools listed", func() bool {
		names := testutil.ToolNames(t, cs)
		return names["liar__echo"] && names["legacy__huge"] && names["good__echo"]
	})
	before := procStatus(t, d.PID, "VmRSS")

	drip := make(chan error, 1)
	go func() {
		_, err := testutil.CallTool(t, cs, "liar__drip", nil)
		drip <- err
	}()
	for _, name := range []string{"liar__huge", "liar__many-lines", "liar__huge-json", "liar__endless", "legacy__huge"} {
		res, err := testutil.CallTool(t, cs, name, nil)
		if err == nil && !res.IsError {
			t.Errorf("%s answered %q; want an error for an answer over max_message_bytes", name, testutil.ToolText(res))
		}
	}
	if res, err := testutil.CallTool(t, cs, "liar__redirect", nil); err == nil && !res.IsError {
		t.Errorf("liar__redirect answered %q; want the redirect to another origin refused", testutil.ToolText(res))
	}
	testutil.MustCallTool(t, cs, "liar__flood-stream", nil)
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "liar__stranger-id", nil)); got != "fine" {
		t.Errorf("liar__stranger-id = %q, want the answer to the request sent", got)
	}
	testutil.CallTool(t, cs, "liar__bad-utf8", nil) // any answer, or an error: it ends
	if err := <-drip; err == nil {
		t.Error("liar__drip answered; want its timeout")
	}
	if l.dripped.Load() == 0 {
		t.Error("the drip never started")
	}
	// Each answer too large is journaled, those on the GET stream too.
	if !testutil.Poll(wait, 10*time.Millisecond, func() bool {
		return strings.Count(d.Stderr.String(), "dropped a message from the server") >= 7
	}) {
		t.Errorf("the daemon did not log the 7 answers too large it dropped")
	}

	peak := procStatus(t, d.PID, "VmHWM")
	t.Logf("daemon RSS %d MiB before the attacks, peak %d MiB after %d attacks of %d MiB each; limit %d MiB",
		before>>20, peak>>20, 7, hostileAttack>>20, hostileLimit>>20)
	if peak-before > hostileRSSBound {
		t.Errorf("the daemon's peak RSS grew by %d MiB, more than %d MiB for a limit of %d MiB", (peak-before)>>20, hostileRSSBound>>20, hostileLimit>>20)
	}

	for _, name := range []string{"good__echo", "liar__echo", "legacy__echo"} {
		res := testutil.MustCallTool(t, cs, name, map[string]any{"text": "still here"})
		if got := testutil.ToolText(res); got != "still here" && got != "fine" {
			t.Errorf("%s after the attacks = %q", name, got)
		}
	}
	if !testutil.Poll(wait, 10*time.Millisecond, func() bool {
		return strings.Contains(d.Stderr.String(), "another origin than the configured "+ts.URL)
	}) {
		t.Errorf("the elsewhere backend did not fail for its endpoint of another origin")
	}
	if n := other.requests.Load(); n != 0 {
		t.Errorf("the other origin got %d requests, %d with a credential header", n, other.credentials.Load())
	}
	if strings.Contains(d.Stderr.String(), "k3y-for-the-liar-only") {
		t.Error("the daemon's output holds the credential")
	}
}
