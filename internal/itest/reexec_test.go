package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/handoff"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// installBinary puts a copy of the daemon at path by rename, as dpkg
// installs a new binary: another file at the same path.
func installBinary(t *testing.T, from, path string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tmp := path + ".dpkg-new"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// initializes counts the initialize requests a fake server's --record
// file holds.
func initializes(t *testing.T, record string) int {
	t.Helper()
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), `"method":"initialize"`)
}

// statelessCall makes a 2026-07-28 tools/call on its own connection, and
// returns the text of its result or why there is none.
func statelessCall(url, tool, args string) (string, error) {
	body := statelessBody(1, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args))
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool} {
		req.Header.Set(k, v)
	}
	client := http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var m struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.Result == nil || m.Result.IsError || len(m.Result.Content) == 0 {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	return m.Result.Content[0].Text, nil
}

// A reload that finds a new binary where mcpgated was started from
// re-executes it in place, twice in a row: the daemon keeps its PID
// (RELOADING=1, then the new image's READY=1, from the same PID), the
// backend keeps its process and gets no second initialize, a slow call in
// flight gets its result once, and a stateless client calling in a loop
// meanwhile sees no error: new connections wait in the listener's backlog
// for the new image. The backend's process is started on the thread that
// re-executes, or the first re-exec's would end the second's children.
func TestReexecKeepsBackends(t *testing.T) {
	bins := testutil.Build(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "mcpgated")
	installBinary(t, bins.Daemon, exe)
	record := filepath.Join(dir, "record")
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.c]
command = %q
args = ["--record", %q]
`, bins.Fake, record), testutil.ConfigOptions{Gateway: fmt.Sprintf("state_directory = %q", filepath.Join(dir, "state"))})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Binary: exe})
	pid := func() string {
		t.Helper()
		text, err := statelessCall(url, "c__pid", "{}")
		if err != nil {
			t.Fatalf("c__pid: %v", err)
		}
		return text
	}
	first := pid()

	for round := 1; round <= 2; round++ {
		slow := make(chan error, 1)
		go func() {
			text, err := statelessCall(url, "c__slow", `{"ms":1500}`)
			if err == nil && text != "slept 1500 ms" {
				err = fmt.Errorf("answered %q", text)
			}
			slow <- err
		}()
		stop := make(chan struct{})
		loop := make(chan []error, 1)
		go func() {
			var errs []error
			for n := 0; ; n++ {
				select {
				case <-stop:
					loop <- errs
					return
				default:
				}
				if _, err := statelessCall(url, "c__echo", fmt.Sprintf(`{"text":"loop %d"}`, n)); err != nil {
					errs = append(errs, err)
				}
			}
		}()
		testutil.Eventually(t, 10*time.Second, "the slow call reaching the backend", func() bool {
			data, _ := os.ReadFile(record)
			return strings.Count(string(data), `"name":"slow"`) == round
		})
		installBinary(t, bins.Daemon, exe)
		mark := d.Notify.Mark(t)
		if err := syscall.Kill(d.PID, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		reloading := d.Notify.Await(t, mark, 30*time.Second, "RELOADING=1", testutil.Has("RELOADING=1"))
		ready := d.Notify.Await(t, reloading, 60*time.Second, "READY=1 of the new image", testutil.Has("READY=1"))
		if got := d.Notify.Sender(ready); got != d.PID {
			t.Errorf("round %d: READY=1 came from pid %d, want the daemon's %d: a re-exec keeps the PID", round, got, d.PID)
		}
		if err := <-slow; err != nil {
			t.Errorf("round %d: the call in flight during the re-exec: %v", round, err)
		}
		pid() // one answer of the new image inside the loop's run
		close(stop)
		if errs := <-loop; len(errs) > 0 {
			t.Errorf("round %d: the stateless loop saw %d errors across the re-exec, the first: %v", round, len(errs), errs[0])
		}
		d.Stderr.Await(t, 10*time.Second, "the backend taken over", func(s string) bool {
			return strings.Count(s, `backend \"c\" (pid `+first+`) taken over from the previous mcpgated without a new handshake`) == round
		})
		if got := pid(); got != first {
			t.Fatalf("round %d: the backend's pid is %s after the re-exec, want %s: it was restarted", round, got, first)
		}
		if n := initializes(t, record); n > 1 {
			t.Errorf("round %d: the backend got %d initialize requests, want at most 1: the re-exec repeated the handshake", round, n)
		}
	}
}

// What mcpgated is handed at start as the previous image's record is
// refused, journaled with the reason, when it is not this process's own:
// changed after it was sealed, or sealed in a previous boot. The daemon
// then starts clean: its backend is started (and initialized) anew.
func TestHandoffRecordRefused(t *testing.T) {
	bins := testutil.Build(t)
	for _, tt := range []struct {
		name   string
		boot   func(string) string
		tamper bool
		want   string
	}{
		{"tampered", func(b string) string { return b }, true, "handoff record failed authentication"},
		{"previous boot", func(string) string { return "00000000-0000-0000-0000-000000000000" }, false, "handoff record is from another boot"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			key, err := handoff.LoadKey(state)
			if err != nil {
				t.Fatal(err)
			}
			boot, err := handoff.BootID()
			if err != nil {
				t.Fatal(err)
			}
			record := filepath.Join(dir, "record")
			toml, url := testutil.ConfigWith(t, fmt.Sprintf("[backends.c]\ncommand = %q\nargs = [\"--record\", %q]\n", bins.Fake, record),
				testutil.ConfigOptions{Gateway: fmt.Sprintf("state_directory = %q", state)})
			// The record comes through a pipe: its PID is the daemon's,
			// known once it runs.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			started := make(chan int, 1)
			go func() {
				pid := <-started
				sealed, err := handoff.Seal(&handoff.Record{BootID: tt.boot(boot), PID: pid, Version: "test"}, key)
				if err != nil {
					panic(err)
				}
				if tt.tamper {
					sealed[len(sealed)/2] ^= 1
				}
				w.Write(sealed)
				w.Close()
			}()
			d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{
				Env: []string{handoff.EnvFD + "=3"}, ExtraFiles: []*os.File{r}, NoWait: true,
			})
			r.Close()
			started <- d.PID
			d.Notify.Await(t, 0, 60*time.Second, "READY=1", testutil.Has("READY=1"))
			d.Stderr.Await(t, 10*time.Second, "the refusal", func(s string) bool {
				return strings.Contains(s, "refusing what the previous mcpgated handed on: "+tt.want) && strings.Contains(s, "message_id=acdc0abbd6b949f483be84256b87c547")
			})
			if text, err := statelessCall(url, "c__echo", `{"text":"clean"}`); err != nil || text != "clean" {
				t.Errorf("a call after the refusal: %q, %v", text, err)
			}
			if n := initializes(t, record); n != 1 {
				t.Errorf("the backend got %d initialize requests, want 1: started clean", n)
			}
		})
	}
}

// A 2025-era session outlives the re-exec: the client's SDK reconnects
// its event stream with the same Mcp-Session-Id, its next call is
// answered without a new initialize, its resource subscription still
// brings the backend's notifications/resources/updated, and its
// unsubscribe, counted as the last, reaches the backend.
func TestReexecKeepsSessions(t *testing.T) {
	bins := testutil.Build(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "mcpgated")
	installBinary(t, bins.Daemon, exe)
	record := filepath.Join(dir, "record")
	toml, url := testutil.ConfigWith(t, fmt.Sprintf(`
[backends.c]
command = %q
args = ["--record", %q, "--resources", "2"]
`, bins.Fake, record), testutil.ConfigOptions{Gateway: fmt.Sprintf("state_directory = %q", filepath.Join(dir, "state"))})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Binary: exe})

	updated := make(chan string, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "reexec-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	})
	// The SDK's own reconnection, as a client across a network blip.
	cs, err := client.Connect(testutil.Context(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: url}, testutil.LegacySession())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.ListResources(testutil.Context(t, 30*time.Second), nil)
	if err != nil || len(res.Resources) == 0 {
		t.Fatalf("resources/list: %v %v", res, err)
	}
	uri := res.Resources[0].URI
	if err := cs.Subscribe(testutil.Context(t, 30*time.Second), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
	touch := func(what string) {
		t.Helper()
		testutil.MustCallTool(t, cs, "c__touch", map[string]any{"uri": "fake://r/0"})
		select {
		case got := <-updated:
			if got != uri {
				t.Errorf("%s: update of %q, want %q", what, got, uri)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no notifications/resources/updated for the subscription", what)
		}
	}
	touch("before the re-exec")
	before := testutil.FakeProcess(t, cs, "c__pid").PID

	installBinary(t, bins.Daemon, exe)
	mark := d.Notify.Mark(t)
	if err := syscall.Kill(d.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloading := d.Notify.Await(t, mark, 30*time.Second, "RELOADING=1", testutil.Has("RELOADING=1"))
	began := time.Now()
	d.Notify.Await(t, reloading, 60*time.Second, "READY=1 of the new image", testutil.Has("READY=1"))
	ready := time.Since(began)
	if got := testutil.FakeProcess(t, cs, "c__pid").PID; got != before {
		t.Errorf("the session's call reached pid %d after the re-exec, want %d", got, before)
	}
	answered := time.Since(began)
	d.Stderr.Await(t, 10*time.Second, "the session taken over", func(s string) bool {
		return strings.Contains(s, "took over 1 sessions")
	})
	t.Logf("re-exec, race detector on: RELOADING=1 to the new image's READY=1 in %v, to the session's next call answered by it in %v",
		ready.Round(time.Millisecond), answered.Round(time.Millisecond))
	touch("after the re-exec")
	// The subscription was counted again: the session's unsubscribe is the
	// last, and reaches the backend.
	if err := cs.Unsubscribe(testutil.Context(t, 30*time.Second), &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatalf("unsubscribe after the re-exec: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, "resources/unsubscribe at the backend", func() bool {
		data, _ := os.ReadFile(record)
		return strings.Contains(string(data), `"method":"resources/unsubscribe"`)
	})
	if n := strings.Count(d.Stderr.String(), "session started for client"); n != 1 {
		t.Errorf("%d sessions were started, want 1: the client initialized again", n)
	}
	if n := initializes(t, record); n != 1 {
		t.Errorf("the backend got %d initialize requests, want 1", n)
	}
}

// A re-exec reads the configuration anew: a backend whose command line
// changed is started again rather than taken over, one removed is ended
// (nothing of it left running), and one unchanged is taken over.
func TestReexecAppliesTheNewConfiguration(t *testing.T) {
	bins := testutil.Build(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "mcpgated")
	installBinary(t, bins.Daemon, exe)
	backends := func(changedArgs string, withRemoved bool) string {
		s := fmt.Sprintf("[backends.same]\ncommand = %q\n\n[backends.changed]\ncommand = %q\nargs = [%s]\n", bins.Fake, bins.Fake, changedArgs)
		if withRemoved {
			s += fmt.Sprintf("\n[backends.removed]\ncommand = %q\n", bins.Fake)
		}
		return s
	}
	gateway := fmt.Sprintf("state_directory = %q", filepath.Join(dir, "state"))
	toml, url := testutil.ConfigWith(t, backends(`"--name", "one"`, true), testutil.ConfigOptions{Gateway: gateway})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Binary: exe})
	pid := func(tool string) string {
		t.Helper()
		text, err := statelessCall(url, tool, "{}")
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return text
	}
	same, changed, removed := pid("same__pid"), pid("changed__pid"), pid("removed__pid")

	// The same listener, the new backends.
	next := strings.Replace(toml, backends(`"--name", "one"`, true), backends(`"--name", "two"`, false), 1)
	if next == toml {
		t.Fatal("the configuration did not change")
	}
	if err := os.WriteFile(d.ConfigPath, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	installBinary(t, bins.Daemon, exe)
	mark := d.Notify.Mark(t)
	if err := syscall.Kill(d.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloading := d.Notify.Await(t, mark, 30*time.Second, "RELOADING=1", testutil.Has("RELOADING=1"))
	d.Notify.Await(t, reloading, 60*time.Second, "READY=1 of the new image", testutil.Has("READY=1"))

	if got := pid("same__pid"); got != same {
		t.Errorf("the unchanged backend is pid %s after the re-exec, want %s: taken over", got, same)
	}
	if got := pid("changed__pid"); got == changed {
		t.Errorf("the backend whose args changed is still pid %s: want it started again", got)
	}
	d.Stderr.Await(t, 10*time.Second, "why the changed backend was started again", func(s string) bool {
		return strings.Contains(s, `backend \"changed\" (pid `+changed+`): its configuration changed; starting it again`)
	})
	n, err := strconv.Atoi(removed)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the removed backend's process gone", func() bool {
		return syscall.Kill(n, 0) != nil
	})
	if _, err := statelessCall(url, "removed__pid", "{}"); err == nil {
		t.Error("the removed backend's tool still answers")
	}
}

// A real stateful server spoken to in 2026-07-28 over stdio (the Go
// SDK's, of both eras) keeps what it holds in memory through the re-exec:
// a note written before is read after, from the same process, by a 2025
// session that goes on and by a stateless request.
func TestReexecKeepsAModernServersState(t *testing.T) {
	bins := testutil.Build(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "mcpgated")
	installBinary(t, bins.Daemon, exe)
	toml, url := testutil.ConfigWith(t, notesBackend(t, "g", ""), testutil.ConfigOptions{Gateway: fmt.Sprintf("state_directory = %q", filepath.Join(dir, "state"))})
	d := testutil.StartDaemon(t, toml, url, testutil.DaemonOptions{Binary: exe})
	client := mcp.NewClient(&mcp.Implementation{Name: "reexec-test", Version: "1"}, nil)
	cs, err := client.Connect(testutil.Context(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: url}, testutil.LegacySession())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "g__add_note", map[string]any{"text": "before the re-exec"})); got != "note 1 added" {
		t.Fatalf("add_note: %q", got)
	}
	servers := serversOf(t, d.PID)
	if len(servers) != 1 {
		t.Fatalf("notes servers %v, want one", servers)
	}
	d.Stderr.Await(t, 10*time.Second, "the server spoken to in 2026-07-28", func(s string) bool {
		return strings.Contains(s, `backend \"g\" ready`) && strings.Contains(s, "protocol_version=2026-07-28")
	})

	installBinary(t, bins.Daemon, exe)
	mark := d.Notify.Mark(t)
	if err := syscall.Kill(d.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloading := d.Notify.Await(t, mark, 30*time.Second, "RELOADING=1", testutil.Has("RELOADING=1"))
	d.Notify.Await(t, reloading, 60*time.Second, "READY=1 of the new image", testutil.Has("READY=1"))

	if got := testutil.ToolText(testutil.MustCallTool(t, cs, "g__notes", nil)); got != "notes: before the re-exec" {
		t.Errorf("the session reads %q after the re-exec, want the note written before", got)
	}
	if got, err := statelessCall(url, "g__notes", "{}"); err != nil || got != "notes: before the re-exec" {
		t.Errorf("a stateless request reads %q (%v) after the re-exec, want the note written before", got, err)
	}
	if after := serversOf(t, d.PID); len(after) != 1 || after[0] != servers[0] {
		t.Errorf("notes servers %v after the re-exec, want the same %v", after, servers)
	}
	if n := strings.Count(d.Stderr.String(), `backend \"g\" ready`); n != 1 {
		t.Errorf("the backend made %d handshakes, want 1", n)
	}
}
