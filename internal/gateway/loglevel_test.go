package gateway

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/journal"
)

func TestMCPLevelsByPriority(t *testing.T) {
	for prio, name := range mcpLevels {
		if got, ok := journal.MCPLevelPriority(name); !ok || got != prio {
			t.Errorf("MCPLevelPriority(%q) = %d, %v; mcpLevels has it at %d", name, got, ok, prio)
		}
	}
}
