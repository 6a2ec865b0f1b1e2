package clitool

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// TestMain makes the test process a child subreaper, as mcpgated is, so
// that Call can reap the grandchildren of the programs it runs.
func TestMain(m *testing.M) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// printArgv writes each of its arguments followed by NUL.
const printArgv = `for a in "$@"; do printf '%s\0' "$a"; done`

func tool(command []string, props map[string]any, required ...string) *config.CLITool {
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		req := make([]any, len(required))
		for i, r := range required {
			req[i] = r
		}
		schema["required"] = req
	}
	return &config.CLITool{Name: "t", Command: command, InputSchema: schema, Output: "text", Timeout: 30 * time.Second}
}

type toolResult struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func call(t *testing.T, tl *config.CLITool, args string) toolResult {
	t.Helper()
	raw, err := Call(context.Background(), tl, json.RawMessage(args), Options{Env: os.Environ(), MaxOutputBytes: 1 << 20})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r
}

func TestArgumentsStayOneArgvElement(t *testing.T) {
	tl := tool([]string{"sh", "-c", printArgv, "sh", "{{v}}", "--flag={{v}}"}, map[string]any{"v": map[string]any{"type": "string"}}, "v")
	for _, v := range []string{
		"a; rm -rf /tmp/nothing",
		"$(touch /tmp/mcpgate-pwned)",
		"`id`",
		`"double" 'single'`,
		"line one\nline two",
		"--help",
		"-rf",
		"*",
		"",
	} {
		t.Run(strconv.Quote(v), func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"v": v})
			r := call(t, tl, string(args))
			if r.IsError {
				t.Fatalf("error result: %s", r.Content[0].Text)
			}
			got := strings.Split(strings.TrimSuffix(r.Content[0].Text, "\x00"), "\x00")
			want := []string{v, "--flag=" + v}
			if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Errorf("argv = %q, want %q", got, want)
			}
		})
	}
	if _, err := os.Stat("/tmp/mcpgate-pwned"); err == nil {
		t.Error("a shell ran an argument")
	}
}

func TestOptionalPlaceholderIsDropped(t *testing.T) {
	tl := tool([]string{"sh", "-c", printArgv, "sh", "{{a}}", "{{b}}", "x{{b}}"}, map[string]any{"a": map[string]any{"type": "integer"}, "b": map[string]any{"type": "string"}})
	r := call(t, tl, `{"a": 7}`)
	if got := r.Content[0].Text; got != "7\x00x\x00" {
		t.Errorf("argv = %q, want 7 and x", got)
	}
}

func TestSchemaValidation(t *testing.T) {
	tl := tool([]string{"true"}, map[string]any{
		"name":  map[string]any{"type": "string", "minLength": int64(2)},
		"count": map[string]any{"type": "integer", "minimum": int64(1)},
		"mode":  map[string]any{"enum": []any{"fast", "slow"}},
	}, "name")
	for _, tc := range []struct{ args, want string }{
		{`{}`, `missing required argument "name"`},
		{`{"name": 3}`, `argument "name" must be of type string, not integer`},
		{`{"name": "x"}`, `argument "name" must be at least 2 characters long`},
		{`{"name": "xy", "count": 0}`, `argument "count" must be at least 1`},
		{`{"name": "xy", "count": 1.5}`, `argument "count" must be of type integer, not number`},
		{`{"name": "xy", "mode": "medium"}`, `argument "mode" must be one of ["fast","slow"]`},
		{`[1]`, `arguments must be a JSON object`},
	} {
		t.Run(tc.args, func(t *testing.T) {
			_, err := Call(context.Background(), tl, json.RawMessage(tc.args), Options{})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, tc.want) {
				t.Errorf("error = %v, want -32602 containing %q", err, tc.want)
			}
		})
	}
}

func TestFailureCarriesStatusAndStderr(t *testing.T) {
	tl := tool([]string{"sh", "-c", `for i in $(seq 1 30); do echo "line $i" >&2; done; exit 3`}, nil)
	r := call(t, tl, `{}`)
	text := r.Content[0].Text
	if !r.IsError || !strings.Contains(text, "exited with status 3") || !strings.Contains(text, "line 30") || strings.Contains(text, "line 10\n") {
		t.Errorf("result %+v: want isError, the status and the last 20 stderr lines", r)
	}
	missing := call(t, tool([]string{"/nonexistent/program"}, nil), `{}`)
	if !missing.IsError || !strings.Contains(missing.Content[0].Text, "cannot run /nonexistent/program") {
		t.Errorf("missing program: %+v", missing)
	}
}

func TestJSONOutput(t *testing.T) {
	tl := tool([]string{"echo", `{"a": {"b": 1}}`}, nil)
	tl.Output = "json"
	r := call(t, tl, `{}`)
	if r.IsError || string(r.StructuredContent) != `{"a":{"b":1}}` {
		t.Errorf("result %+v: want structuredContent", r)
	}
	tl.Command = []string{"echo", "not json"}
	if r := call(t, tl, `{}`); !r.IsError {
		t.Errorf("non-JSON output with output = json: %+v", r)
	}
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	tl := tool([]string{"sh", "-c", `sleep 1000 & echo $! > "$1"; wait`, "sh", pidFile}, nil)
	tl.Timeout = 300 * time.Millisecond
	r := call(t, tl, `{}`)
	if !r.IsError || !strings.Contains(r.Content[0].Text, "timeout") {
		t.Errorf("result %+v: want a timeout error", r)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// Call reaped the group, so the grandchild is not even a zombie.
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("grandchild %d still exists after the timeout (kill 0: %v)", pid, err)
		unix.Kill(pid, unix.SIGKILL)
	}
}

func TestOutputBound(t *testing.T) {
	tl := tool([]string{"sh", "-c", `while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done`}, nil)
	raw, err := Call(context.Background(), tl, nil, Options{MaxOutputBytes: 64 << 10})
	if err != nil || !strings.Contains(string(raw), "more than max_message_bytes") {
		t.Errorf("result %s, %v: want the output bound", raw, err)
	}
}

func TestCancelKillsTheProgram(t *testing.T) {
	tl := tool([]string{"sleep", "1000"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan json.RawMessage)
	go func() {
		raw, _ := Call(ctx, tl, nil, Options{})
		done <- raw
	}()
	cancel()
	if raw := <-done; !strings.Contains(string(raw), `"isError":true`) {
		t.Errorf("cancelled call: %s", raw)
	}
}
