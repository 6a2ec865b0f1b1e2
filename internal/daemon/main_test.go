package daemon_test

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
