package daemon_test

import (
	"os"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}
