package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// lateRecord is where the late backend records what it got; its handshake
// waits until a second initialize is in it, which the test appends.
const lateRecord = "/var/lib/mcpgate/late.record"

// startupConfig has a healthy backend, one that hangs in its handshake
// (sleep, which never answers, as npx does on a host where it hangs) and
// one held in its handshake until the test lets it go.
var startupConfig = fmt.Sprintf(`# Written by internal/e2e (TestStartupWithAHangingBackend).
[gateway]
runner = "process"

[backends.fake]
command = %[1]q
args = ["--name", "fake"]

[backends.hang]
command = "/bin/sleep"
args = ["infinity"]
timeout = "20s"

[backends.late]
command = %[1]q
args = ["--name", "late", "--record", %[2]q, "--initialize-barrier", "2"]
timeout = "10m"
`, fakeBin, lateRecord)

// TestStartupWithAHangingBackend is issue 22's first item on the
// installed package: under socket activation the first client's
// initialize and its call to a healthy backend are answered while another
// backend hangs in its handshake and mcpgate.service is still activating;
// a backend that finishes its handshake later joins with
// tools/list_changed; READY=1 (the service turning active) still waits
// for every backend's first attempt, the hanging one's failure included.
func TestStartupWithAHangingBackend(t *testing.T) {
	Require(t)
	OnlyOn(t, "what it tests is mcpgated's own start-up order; the systemd side (socket activation, activating until READY=1) is TestInstalledPackage's 2-first-client, on every release", "bookworm")
	r, g, _ := bootInstalled(t)

	r.step("s1-install", g.checkInstall)
	r.step("s2-hanging-backend", g.checkHangingBackend)
}

// checkHangingBackend: see TestStartupWithAHangingBackend.
func (g *installedGateway) checkHangingBackend(t *testing.T) string {
	c := g.c
	c.WriteFile(t, "/etc/mcpgate/conf.d/e2e.toml", []byte(startupConfig), 0o644)
	g.token = c.Run(t, "mcpgatectl", "token", "create", "e2e")
	if state := g.activeState(t); state != "inactive" {
		t.Fatalf("mcpgate.service is %s before any client, want inactive", state)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	hc := c.HTTPClient()
	hc.Transport = bearerTransport{token: g.token, next: hc.Transport}
	start := time.Now()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gatewayURL, HTTPClient: hc, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("first MCP client: %v", err)
	}
	g.client = cs
	initialized := time.Since(start)
	// awaitTool waits until tools/list has name, each look after a
	// tools/list_changed.
	awaitTool := func(name string) []string {
		t.Helper()
		for {
			tools := toolNames(t, cs)
			if slices.Contains(tools, name) {
				return tools
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("no %s after the last tools/list_changed; tools %v", name, tools)
			}
		}
	}
	awaitTool("fake__echo")
	called := time.Now()
	if got := callText(t, cs, "fake__echo", map[string]any{"text": "not held"}); got != "not held" {
		t.Errorf("fake__echo answered %q", got)
	}
	call := time.Since(called)
	// late is held until the gate opens: the service cannot be ready yet.
	if state := g.activeState(t); state != "activating" {
		t.Errorf("mcpgate.service is %s while late is held in its handshake, want activating (no READY=1)", state)
	}
	tools := toolNames(t, cs)
	if slices.Contains(tools, "late__echo") {
		t.Errorf("late's tools listed while it is in its handshake: %v", tools)
	}

	// late got its initialize (it writes the file, as user mcpgate); then
	// the gate opens.
	c.Run(t, "timeout", "60", "sh", "-c", "until grep -q initialize "+lateRecord+" 2>/dev/null; do sleep 0.1; done")
	c.Run(t, "sh", "-c", `echo '{"jsonrpc":"2.0","id":"gate","method":"initialize","params":{}}' >> `+lateRecord)
	tools = awaitTool("late__echo")
	// READY=1 waits for hang's first attempt to fail (its timeout): a
	// start job merges with the one running and returns at READY=1.
	c.Run(t, "systemctl", "start", "mcpgate.service")
	if state := g.activeState(t); state != "active" {
		t.Errorf("mcpgate.service is %s after its start job, want active", state)
	}
	var hangFailed, ready JournalEntry
	for _, e := range g.journal(t, "--unit=mcpgate.service") {
		switch {
		case e["MESSAGE_ID"] == journal.MessageStartFailed.String() && e["MCPGATE_BACKEND"] == "hang" && hangFailed == nil:
			hangFailed = e
		case e["MESSAGE_ID"] == journal.MessageReady.String():
			ready = e
		}
	}
	if hangFailed == nil || ready == nil {
		t.Fatalf("the journal lacks hang's start failure (%v) or the gateway's ready entry (%v)", hangFailed != nil, ready != nil)
	}
	if monotonic(hangFailed) >= monotonic(ready) {
		t.Errorf("READY (%d µs) came before hang's first attempt failed (%d µs)", monotonic(ready), monotonic(hangFailed))
	}
	if msg := hangFailed["MESSAGE"]; !strings.Contains(msg, `backend "hang" could not start`) {
		t.Errorf("hang's start failure reads %q, want it named in the message", msg)
	}
	if t.Failed() {
		return ""
	}
	return fmt.Sprintf("initialize answered in %v and fake__echo in %v while hang and late were in their handshakes (service activating); late joined with tools/list_changed (%d tools); READY=1 after hang's timeout",
		initialized.Round(time.Millisecond), call.Round(time.Millisecond), len(tools))
}

// awaitReady waits for READY=1 of a service a client started: a start job
// merges with the running one and returns when the service is active.
func (g *installedGateway) awaitReady(t *testing.T) {
	t.Helper()
	g.c.Run(t, "systemctl", "start", "mcpgate.service")
}
