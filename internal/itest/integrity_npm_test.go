package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// sequentialThinking returns the entry point of a pinned version of
// @modelcontextprotocol/server-sequential-thinking, installed under an
// alias by packaging/ci/deps.sh (packaging/npm/package.json).
func sequentialThinking(t *testing.T, version string) string {
	t.Helper()
	path := filepath.Join(testutil.CacheDir(), "npm", "node_modules", "sequential-thinking-"+version, "dist", "index.js")
	if _, err := os.Stat(path); err != nil {
		testutil.Unavailable(t, "server-sequential-thinking %s is not installed (run packaging/ci/deps.sh, which make check runs): %v", version, err)
	}
	return path
}

// TestIntegrityHoldsBackAnNpmUpdate runs a published MCP server, then its
// next version, whose tool description changed (2025.12.18 renamed the
// parameters its description names), as the same backend under pin: the
// updated tool is held back until approved, then served.
func TestIntegrityHoldsBackAnNpmUpdate(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node is not installed: %v", err)
	}
	older, newer := sequentialThinking(t, "2025.11.25"), sequentialThinking(t, "2025.12.18")
	r := newIntegrityRig(t, "pin")
	r.backends = func(string) string {
		return fmt.Sprintf("[backends.think]\ncommand = %q\nargs = [%q]\n", node, r.npmEntry)
	}
	call := map[string]any{"thought": "one step", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1}

	r.npmEntry = older
	cs := r.start().Connect(t, nil)
	mustServeWith(t, cs, "think__sequentialthinking", call)

	r.npmEntry = newer
	d := r.start()
	cs = d.Connect(t, nil)
	mustNotServe(t, cs, "think__sequentialthinking")
	awaitLog(t, d, "item=sequentialthinking")
	out, code := r.ctl("integrity", "diff", "think")
	if code != 0 || !strings.Contains(out, "-  11. Only set next_thought_needed to false") || !strings.Contains(out, "+  11. Only set nextThoughtNeeded to false") {
		t.Fatalf("integrity diff think (exit %d):\n%s", code, out)
	}
	if out, code := r.ctl(append([]string{"integrity", "approve", "think"}, r.reviewed("think")...)...); code != 0 || !strings.Contains(out, "approved tool:sequentialthinking") {
		t.Fatalf("integrity approve think: exit %d\n%s", code, out)
	}
	mustServeWith(t, cs, "think__sequentialthinking", call)
}
