package itest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// sdkStdioEnv makes this test binary, started with it set, serve
// notesServer over stdio instead of running tests: a stateful server of
// both eras on the official Go SDK (go-sdk 1.8), whose stdio connection
// takes the era of its first message.
const sdkStdioEnv = "MCPGATE_TEST_SDK_STDIO"

func init() {
	if os.Getenv(sdkStdioEnv) != "1" {
		return
	}
	if err := notesServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// notesServer keeps notes in its memory: add_note adds one, and a prompt
// note-N that shows it (beside the prompt welcome); notes lists them. confirm asks its client to
// confirm in 2026-07-28's way (an InputRequiredResult, which the SDK
// turns into an elicitation request for a 2025 client), sample the 2025
// way (ServerSession.CreateMessage, which the SDK refuses in 2026-07-28).
func notesServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-notes", Version: "1"}, nil)
	srv.AddPrompt(&mcp.Prompt{Name: "welcome"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "welcome"}}}}, nil
	})
	var mu sync.Mutex
	var notes []string
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add_note"}, func(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		notes = append(notes, in.Text)
		n := len(notes)
		mu.Unlock()
		srv.AddPrompt(&mcp.Prompt{Name: "note-" + strconv.Itoa(n)}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Text}}}}, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("note %d added", n)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "notes"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		defer mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "notes: " + strings.Join(notes, "; ")}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "confirm"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult); ok && r != nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed: " + r.Action}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Really?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	return srv
}

// ctlOnBus runs mcpgatectl --user with args against the gateway on the
// session bus at addr, and returns its output and exit code.
func ctlOnBus(t *testing.T, addr string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(testutil.Context(t, 60*time.Second), testutil.Build(t).Ctl, append([]string{"--user"}, args...)...)
	cmd.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS="+addr)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// notesBackend configures notesServer as the backend NAME, with more keys.
func notesBackend(t *testing.T, name, keys string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("[backends.%s]\ncommand = %q\nargs = [\"-test.run=^$\"]\nenv = { %s = \"1\" }\n%s\n", name, exe, sdkStdioEnv, keys)
}

// serversOf lists the pids of notesServer processes that are children of
// the daemon pid.
func serversOf(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		stat, err2 := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil || err2 != nil || !strings.Contains(string(env), sdkStdioEnv+"=1") {
			continue
		}
		// pid (comm) state ppid ...
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(filepath.Base(dir))
			out = append(out, n)
		}
	}
	return out
}

// A stateful server of both eras over stdio is one process, driven in
// 2026-07-28, whatever its clients speak: what a 2025 session writes a
// 2026-07-28 client reads, and the reverse; a prompt one adds reaches the
// catalog, and the other's list; the 2025 session's confirmation is the
// SDK's in-band question, asked on the session; its results carry nothing
// of 2026-07-28; mcpgatectl status shows one PID, the one process there is.
func TestDualStdioServerIsOneProcess(t *testing.T) {
	d, bus, addr := gatewayOnBus(t, notesBackend(t, "g", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := bus.Backend(ctx, "g")
	if err != nil || st.Era != "dual" || st.ProtocolVersion != "2026-07-28" || st.MainPID == 0 {
		t.Fatalf("backend g: era %q, protocol %q, pid %d (%v); want a dual server driven in 2026-07-28", st.Era, st.ProtocolVersion, st.MainPID, err)
	}
	if pids := serversOf(t, d.PID); len(pids) != 1 || uint32(pids[0]) != st.MainPID {
		t.Errorf("the server runs as %v; want one process, Main PID %d", pids, st.MainPID)
	}
	status, code := ctlOnBus(t, addr, "status", "g")
	if code != 0 || strings.Count(status, fmt.Sprint(st.MainPID)) != 1 {
		t.Errorf("mcpgatectl status (exit %d):\n%s\nwant the one PID %d once", code, status, st.MainPID)
	}

	ev := testutil.NewClientEvents("2025")
	opts := ev.ClientOptions()
	cs := connect2025(t, d.URL, opts)
	call := func(name string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s for the 2025 session: %+v, %v", name, res, err)
		}
		return testutil.ToolText(res)
	}
	stateless := func(id int, name, args string) string {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":%q,"arguments":%s}}`, id, name, args)
		resp, answer := exchange(t, http.DefaultClient, d.URL, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name)
		if resp.StatusCode != 200 {
			t.Fatalf("%s for a 2026-07-28 client: HTTP %d %s", name, resp.StatusCode, answer)
		}
		return answer
	}

	call("g__add_note", map[string]any{"text": "written by 2025"})
	if got := stateless(1, "g__notes", `{}`); !strings.Contains(got, "written by 2025") || strings.Contains(got, "sdk-notes") || !strings.Contains(got, `serverInfo":{"name":"mcpgate"`) {
		t.Errorf("a 2026-07-28 client reads %s; want the 2025 session's note, with mcpgate's serverInfo, not the server's", got)
	}
	stateless(2, "g__add_note", `{"text":"written by 2026"}`)
	if got := call("g__notes", nil); got != "notes: written by 2025; written by 2026" {
		t.Errorf("the 2025 session reads %q; want both notes", got)
	}
	// The prompt the 2026 client's note added is the catalog's: the
	// session hears of it and lists it.
	ev.Await(t, 1, 30*time.Second, "prompts/list_changed", testutil.Method("notifications/prompts/list_changed"))
	testutil.Eventually(t, 30*time.Second, "prompt g__note-2 listed for the 2025 session", func() bool {
		res, err := cs.ListPrompts(ctx, nil)
		if err != nil {
			return false
		}
		for _, p := range res.Prompts {
			if p.Name == "g__note-2" {
				return true
			}
		}
		return false
	})
	if got := call("g__confirm", nil); got != "confirmed: accept" {
		t.Errorf("g__confirm for the 2025 session = %q; want it confirmed with the session's answer", got)
	}
	if n := ev.Count(testutil.Method("elicitation/create")); n != 1 {
		t.Errorf("the 2025 session was asked %d times; want once", n)
	}
	raw := newRawClient(t, d.URL).post(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"g__notes","arguments":{}}}`)
	if !strings.Contains(raw, "written by 2026") || strings.Contains(raw, "resultType") || strings.Contains(raw, "serverInfo") || strings.Contains(raw, "sdk-notes") {
		t.Errorf("a 2025 session's result %s; want the notes, without resultType or the server's serverInfo", raw)
	}
	if pids := serversOf(t, d.PID); len(pids) != 1 {
		t.Errorf("after both eras' calls the server runs as %v; want one process", pids)
	}
}

// With era = "legacy" a server of both eras is initialized, never probed:
// one process of the 2025 era, whose tool that asks its client the 2025
// way works for a 2025 session.
func TestDualStdioServerEraLegacy(t *testing.T) {
	d, bus, _ := gatewayOnBus(t, notesBackend(t, "g", `era = "legacy"`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := bus.Backend(ctx, "g")
	if err != nil || st.Era != "legacy" || st.ProtocolVersion != "2025-11-25" {
		t.Fatalf("backend g: era %q, protocol %q (%v); want legacy, initialized with 2025-11-25", st.Era, st.ProtocolVersion, err)
	}
	cs := connect2025(t, d.URL, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
	})
	res := testutil.MustCallTool(t, cs, "g__sample", map[string]any{})
	if got := testutil.ToolText(res); got != "sampled" || res.IsError {
		t.Errorf("g__sample for a 2025 session = %q (error %v); want the session's sampled answer", got, res.IsError)
	}
	if pids := serversOf(t, d.PID); len(pids) != 1 {
		t.Errorf("the server runs as %v; want one process", pids)
	}
}
