package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// A remote backend shows its URL where a child shows its command and PID.
func TestPrintRemoteBackend(t *testing.T) {
	b := dbusapi.BackendStatus{Name: "a", State: "healthy", Era: "modern", ProtocolVersion: "2026-07-28", URL: "https://gw-a.example/mcp", Tools: []string{"a__x"}}
	var out bytes.Buffer
	printBackend(&out, b, time.Now(), false)
	if got := out.String(); !strings.Contains(got, "         URL: https://gw-a.example/mcp\n") || strings.Contains(got, "Main PID") || strings.Contains(got, "Command") {
		t.Errorf("got:\n%s\nwant the URL instead of command and PID", got)
	}
	if got := out.String(); !strings.Contains(got, "    Protocol: 2026-07-28 (modern)\n") {
		t.Errorf("got:\n%s\nwant the protocol version and era", got)
	}
	out.Reset()
	printOverview(&out, statusJSON{Backends: []dbusapi.BackendStatus{b}}, false)
	if got := out.String(); !strings.Contains(got, "healthy  modern  https://gw-a.example/mcp  0") {
		t.Errorf("overview:\n%s\nwant the era, and the URL in the PID column", got)
	}
}
