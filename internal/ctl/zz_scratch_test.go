package ctl

import (
	"testing"
	"time"
	"context"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestZZScratch(t *testing.T) {
	t0 := time.Now()
	_, socket := bridgeGateway(t)
	t.Logf("daemon %v", time.Since(t0)); t0 = time.Now()
	cs, _ := bridgeClient(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}}, "--socket", socket)
	t.Logf("connect %v", time.Since(t0)); t0 = time.Now()
	bridgeTools(t, cs)
	t.Logf("tools %v", time.Since(t0)); t0 = time.Now()
	cs.Close()
	t.Logf("close %v", time.Since(t0)); t0 = time.Now()
}
