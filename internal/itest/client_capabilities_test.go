package itest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// client_capabilities declares less to a backend: server-everything,
// which offers its sampling and elicitation tools (URL-mode elicitation's
// too) only to a client that declared those capabilities, offers them behind the backend that
// declares all it can relay (the default), and not behind the one that
// declares roots only; a request for what was not declared is refused
// by the gateway, whatever the server does.
func TestClientCapabilitiesDeclaredLess(t *testing.T) {
	everything := testutil.NpmServer(t, "mcp-server-everything")
	d := gateway(t, fmt.Sprintf(`
[backends.all]
command = %[1]q
args = ["stdio"]

[backends.roots]
command = %[1]q
args = ["stdio"]
client_capabilities = ["roots"]
`, everything))
	cs := testutil.Connect(t, d.URL, nil)
	var names map[string]bool
	testutil.Eventually(t, 60*time.Second, "server-everything's conditional tools behind all", func() bool {
		names = testutil.ToolNames(t, cs)
		return names["all__trigger-sampling-request"] && names["all__trigger-elicitation-request"]
	})
	if names["roots__trigger-sampling-request"] || names["roots__trigger-elicitation-request"] || !names["roots__echo"] {
		t.Errorf("tools behind roots: %v; want server-everything's without its sampling and elicitation tools", names)
	}
	n := 0
	for name := range names {
		if strings.HasPrefix(name, "all__") {
			n++
		}
		if strings.HasPrefix(name, "roots__") {
			n--
		}
	}
	if n != 3 || !names["all__trigger-url-elicitation"] {
		t.Errorf("all lists %d tools more than roots; want the three that need sampling, elicitation and URL-mode elicitation", n)
	}
}
