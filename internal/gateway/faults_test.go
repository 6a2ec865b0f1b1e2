package gateway_test

// Faults on the call path: backends that hang, lie or misbehave must not
// leave a client without its answer or reach into another backend's calls.

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// hangBackend makes backend name stop reading and writing for good, without
// the gateway noticing: the client cancels the call that hung it, so no
// timeout probes the backend.
func hangBackend(t *testing.T, cs *mcp.ClientSession, name, record string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs.CallTool(ctx, &mcp.CallToolParams{Name: name + "__hang"})
	}()
	awaitRecorded(t, record, 1, `"name":"hang"`)
	cancel()
	<-done
}

// The calls the gateway makes on its own have a deadline: logging/setLevel
// is answered even when a backend never answers it.
func TestSetLevelAnsweredWhenABackendNeverAnswers(t *testing.T) {
	t.Parallel()
	record := recordFile(t, "mute")
	d := startGateway(t, "", fakeBackend(t, "mute", `timeout = "1s"`, "--record", record), fakeBackend(t, "ok", ""))
	cs := connect(t, d, testutil.NewClientEvents("c"), nil)
	hangBackend(t, cs, "mute", record)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("logging/setLevel with a hung backend: %v", err)
	}
}
