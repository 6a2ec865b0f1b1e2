package ctl

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestMain removes the binaries testutil.Build made for the tests of this
// package. It is the package's only TestMain: merge others into it.
func TestMain(m *testing.M) { testutil.Main(m) }
