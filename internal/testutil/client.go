package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ClientEvent is one message a server sent to a go-sdk client on its own
// initiative: a request (sampling, elicitation) or a notification.
type ClientEvent struct {
	Method string // e.g. "sampling/createMessage", "notifications/progress"
	// Params are the message's params as the SDK decoded them, such as
	// *mcp.ProgressNotificationParams or *mcp.CreateMessageParams.
	Params any
}

// ClientEvents records the requests and notifications that reach one go-sdk
// client, so that tests can await them. Its ClientOptions answer sampling
// with the text "from NAME" and accept elicitation with {"name": NAME}, so
// a test can tell which client answered.
type ClientEvents struct {
	Name string

	events Recorder[ClientEvent]
}

// NewClientEvents returns an empty recorder for the client called name.
func NewClientEvents(name string) *ClientEvents {
	return &ClientEvents{Name: name}
}

// Add records an event; handlers that tests install themselves use it too.
func (e *ClientEvents) Add(method string, params any) {
	e.events.Add(ClientEvent{Method: method, Params: params})
}

// ClientOptions returns options whose handlers record every request and
// notification (sampling, elicitation, progress, log messages, resource
// updates, list changes). The client declares sampling and elicitation;
// set the handlers to nil for a client without them.
func (e *ClientEvents) ClientOptions() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			e.Add("sampling/createMessage", req.Params)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-" + e.Name, Content: &mcp.TextContent{Text: "from " + e.Name}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			e.Add("elicitation/create", req.Params)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": e.Name}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			e.Add("notifications/progress", req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			e.Add("notifications/message", req.Params)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			e.Add("notifications/resources/updated", req.Params)
		},
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			e.Add("notifications/tools/list_changed", req.Params)
		},
		PromptListChangedHandler: func(_ context.Context, req *mcp.PromptListChangedRequest) {
			e.Add("notifications/prompts/list_changed", req.Params)
		},
		ResourceListChangedHandler: func(_ context.Context, req *mcp.ResourceListChangedRequest) {
			e.Add("notifications/resources/list_changed", req.Params)
		},
	}
}

// Events returns the events recorded so far, oldest first.
func (e *ClientEvents) Events() []ClientEvent { return e.events.All() }

// Count returns how many recorded events match.
func (e *ClientEvents) Count(match func(ClientEvent) bool) int {
	n := 0
	for _, ev := range e.Events() {
		if match(ev) {
			n++
		}
	}
	return n
}

// Await waits until at least n recorded events match and returns the
// matching ones. It fails the test after timeout, listing what came.
func (e *ClientEvents) Await(t testing.TB, n int, timeout time.Duration, what string, match func(ClientEvent) bool) []ClientEvent {
	t.Helper()
	var got []ClientEvent
	ok := e.events.Within(timeout, func(all []ClientEvent) bool {
		got = got[:0]
		for _, ev := range all {
			if match(ev) {
				got = append(got, ev)
			}
		}
		return len(got) >= n
	})
	if !ok {
		t.Fatalf("client %s: timed out after %s waiting for %d× %s; got %d; all events: %s", e.Name, timeout, n, what, len(got), e)
	}
	return got
}

// String lists the recorded methods, for failure messages.
func (e *ClientEvents) String() string {
	var parts []string
	for _, ev := range e.Events() {
		parts = append(parts, fmt.Sprintf("%s %+v", ev.Method, ev.Params))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// Method returns a match function for events of the given method.
func Method(method string) func(ClientEvent) bool {
	return func(ev ClientEvent) bool { return ev.Method == method }
}

// NpmServer returns the path of the executable name of an npm MCP server
// installed by packaging/ci/deps.sh into CacheDir()/npm, or skips the test
// with the way to install it (see Unavailable).
func NpmServer(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(CacheDir(), "npm", "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		Unavailable(t, "%s is not installed (run packaging/ci/deps.sh, which make check runs): %v", name, err)
	}
	return bin
}

// CacheDir is where make check installs what tests need from the network:
// $MCPGATE_TEST_CACHE, default /var/cache/mcpgate-test.
func CacheDir() string {
	if dir := os.Getenv("MCPGATE_TEST_CACHE"); dir != "" {
		return dir
	}
	return "/var/cache/mcpgate-test"
}

// Unavailable skips a test whose prerequisites are missing (a tool, root,
// an installed server). Under make check, which sets MCPGATE_TEST_STRICT=1
// after installing everything, it fails the test instead: there, a skip
// would hide a test that never ran.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("MCPGATE_TEST_STRICT") == "1" {
		t.Fatalf("prerequisite missing under make check: "+format, args...)
	}
	t.Skipf(format, args...)
}
