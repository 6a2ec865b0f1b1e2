package itest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestRootsListOutsideAnyCall runs the real server-everything, which asks
// its client for roots/list right after every start, when no client call
// is in flight: a backend without roots gets an empty list (logged at
// debug), one with roots gets them; neither fails the request, which the
// server would report on its stderr at every start (issue 22, item 3).
func TestRootsListOutsideAnyCall(t *testing.T) {
	bin := testutil.NpmServer(t, "mcp-server-everything")
	d := gateway(t, fmt.Sprintf(`
[backends.none]
command = %[1]q
args = ["stdio"]

[backends.some]
command = %[1]q
args = ["stdio"]
roots = ["file:///srv/data", "file:///srv/more"]
`, bin))
	// The server logs what it got as an MCP log message; were the request
	// refused, it would write "Failed to request roots" to stderr instead.
	for _, want := range []string{
		`msg="Roots updated: 0 root(s) received from client" backend=none`,
		`msg="Roots updated: 2 root(s) received from client" backend=some`,
		`answered roots/list of backend \"none\" with no roots`,
	} {
		d.Stderr.Await(t, 60*time.Second, want, func(out string) bool { return strings.Contains(out, want) })
	}
	if out := d.Stderr.String(); strings.Contains(out, "Failed to request roots") {
		t.Errorf("server-everything failed to get its roots:\n%s", out)
	}
}
