package itest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testing/modernserver"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// Remote backends on unix sockets, through the daemon: the TypeScript SDK
// v2 fixture (2026-07-28) and the Go SDK (a 2025-11-25 session) each
// serve a 2025 session and a stateless 2026-07-28 call, and D-Bus and
// mcpgatectl status show the socket and the process behind it.
func TestRemoteBackendsOnUnixSockets(t *testing.T) {
	dir := t.TempDir()
	modernSocket := filepath.Join(dir, "modern.sock")
	proc := modernserver.Unix(t, modernSocket)

	sdkSocket := filepath.Join(dir, "sdk.sock")
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-unix", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sdk: " + in.Text}}}, nil, nil
	})
	ln, err := net.Listen("unix", sdkSocket)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-served
	})

	d, bus, busAddr := gatewayOnBus(t, fmt.Sprintf(`
[backends.m]
url = "unix:%s:/mcp"

[backends.g]
url = "unix:%s:/mcp"
`, modernSocket, sdkSocket))

	cs := connect2025(t, d.URL, nil)
	for name, want := range map[string]string{"m__echo": "echo: hi", "g__echo": "sdk: hi"} {
		if got := testutil.ToolText(testutil.MustCallTool(t, cs, name, map[string]any{"text": "hi"})); got != want {
			t.Errorf("%s in a 2025 session = %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]string{"m__echo": "echo: stateless", "g__echo": "sdk: stateless"} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"` + name + `","arguments":{"text":"stateless"}}}`
		_, answer := exchange(t, http.DefaultClient, d.URL, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name)
		result, errMsg := statelessResult(t, answer)
		content, _ := result["content"].([]any)
		if errMsg != "" || len(content) != 1 || content[0].(map[string]any)["text"] != want {
			t.Errorf("%s in 2026-07-28 = %s; want %q", name, answer, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, want := range map[string]struct {
		socket string
		pid    int
		era    string
	}{"m": {modernSocket, proc.Pid, "modern"}, "g": {sdkSocket, os.Getpid(), "legacy"}} {
		st, err := bus.Backend(ctx, name)
		if err != nil || st.URL != "unix:"+want.socket || st.Era != want.era || st.PeerPID != uint32(want.pid) || st.PeerUID != uint32(os.Getuid()) {
			t.Errorf("backend %s on D-Bus: URL %q, era %q, peer pid %d uid %d (%v); want unix:%s, %s, pid %d uid %d",
				name, st.URL, st.Era, st.PeerPID, st.PeerUID, err, want.socket, want.era, want.pid, os.Getuid())
		}
	}
	cmd := exec.Command(testutil.Build(t).Ctl, "--user", "status", "m")
	cmd.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS="+busAddr)
	out, _ := cmd.CombinedOutput()
	if want := fmt.Sprintf("Peer: pid %d (node), uid %d", proc.Pid, os.Getuid()); !strings.Contains(string(out), want) || !strings.Contains(string(out), "URL: unix:"+modernSocket) {
		t.Errorf("mcpgatectl status m:\n%s\nwant the socket and %q", out, want)
	}
}
