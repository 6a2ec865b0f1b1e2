package testutil

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTimeout bounds one tool call or listing in tests.
const callTimeout = 60 * time.Second

// CallTool calls a tool through a go-sdk session.
func CallTool(t testing.TB, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// MustCallTool calls a tool and fails the test on any error, including a
// tool result marked isError.
func MustCallTool(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := CallTool(t, cs, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("call %s: tool error %q", name, ToolText(res))
	}
	return res
}

// ToolText returns the text content of a tool result, one line per item.
func ToolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolNames lists the names of every tool, across pages.
func ToolNames(t testing.TB, cs *mcp.ClientSession) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	names := map[string]bool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		names[tool.Name] = true
	}
	return names
}

// Process is what the fake server's pid tool reports about itself.
type Process struct{ PID, PGID, PPID int }

// FakeProcess calls a fake server's pid tool (e.g. "backend__pid").
func FakeProcess(t testing.TB, cs *mcp.ClientSession, tool string) Process {
	t.Helper()
	raw, err := json.Marshal(MustCallTool(t, cs, tool, nil).StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var p Process
	if err := json.Unmarshal(raw, &p); err != nil || p.PID <= 0 {
		t.Fatalf("%s: structuredContent %s, want {pid, pgid, ppid}", tool, raw)
	}
	return p
}
