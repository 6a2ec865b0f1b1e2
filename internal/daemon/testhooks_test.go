package daemon_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestProductionBuildHasNoTestHooks builds mcpgated as make build does,
// without the test hooks' build tag, and checks that none of the hooks
// testutil's builds carry made it into the binary.
func TestProductionBuildHasNoTestHooks(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mcpgated")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcpgated")
	cmd.Dir = testutil.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, hook := range []string{"test hook: footprint", "daemon.(*daemon).testHooks.func"} {
		if bytes.Contains(data, []byte(hook)) {
			t.Errorf("the production build of mcpgated contains %q, a test hook", hook)
		}
	}
}
