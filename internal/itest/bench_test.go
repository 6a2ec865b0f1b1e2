package itest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// BenchmarkToolCall measures tools/call round trips through the real
// daemon to one child, from parallel clients, each with its own session.
func BenchmarkToolCall(b *testing.B) {
	bins := testutil.Build(b)
	toml, url := testutil.Config(b, strings.ReplaceAll("[backends.s]\ncommand = \"FAKE\"\n", "FAKE", bins.Fake))
	toml = strings.Replace(toml, `log_level = "debug"`, `log_level = "warn"`, 1)
	d := testutil.StartDaemon(b, toml, url, testutil.DaemonOptions{})
	payload := strings.Repeat("x", 1024)
	var sessions atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		sessions.Add(1)
		cs := d.Connect(b, nil)
		params := &mcp.CallToolParams{Name: "s__echo", Arguments: map[string]any{"text": payload}}
		for pb.Next() {
			if _, err := cs.CallTool(context.Background(), params); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(sessions.Load()), "sessions")
}
