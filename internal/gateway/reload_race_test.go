package gateway_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// swappable is a registry of one backend, which a test may replace, as a
// reload does, without the catalog being rebuilt yet.
type swappable struct {
	mu sync.Mutex
	b  *backend.Backend
}

func (r *swappable) Backends() []*backend.Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	return []*backend.Backend{r.b}
}

func (r *swappable) Backend(name string) *backend.Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b.Name() == name {
		return r.b
	}
	return nil
}

// runCLIBackend runs a healthy cli backend named sh with the given tools
// until the test ends.
func runCLIBackend(t *testing.T, tools ...string) *backend.Backend {
	cfg := &config.Backend{Name: "sh", Enabled: true, Transport: "cli", ToolPrefix: "sh__", Timeout: time.Minute, Tools: map[string]*config.CLITool{}}
	for _, name := range tools {
		cfg.Tools[name] = &config.CLITool{Name: name, Command: []string{"true"}, Timeout: time.Minute, InputSchema: map[string]any{"type": "object"}}
	}
	b := backend.New(cfg, backend.Options{Logger: slog.New(slog.DiscardHandler)})
	runBackend(t, b)
	return b
}

// runBackend runs b until the test ends, when it stops b and waits for Run
// to return (a child is reaped by then), and returns once b settled.
func runBackend(t testing.TB, b *backend.Backend) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	<-b.Settled()
}

// A call routed by a catalog that still lists a cli tool which a reload
// removed from its backend is answered "unknown tool": the gateway once
// ran the missing tool and crashed.
func TestCLIToolRemovedByAReloadAsItsCallStarts(t *testing.T) {
	reg := &swappable{b: runCLIBackend(t, "gone", "kept")}
	g := gateway.New(reg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	defer g.Close()
	g.Refresh()
	if _, ok := g.Catalog().Tool("sh__gone"); !ok {
		t.Fatal("sh__gone is not in the catalog")
	}
	// The reload replaced the backend; the catalog is rebuilt only later.
	reg.mu.Lock()
	reg.b = runCLIBackend(t, "kept")
	reg.mu.Unlock()

	s, _, err := g.NewSession(nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	st := s.NewStream(1, false)
	s.HandleRequest(&jsonrpc.Message{JSONRPC: "2.0", ID: []byte("1"), Method: "tools/call", Params: []byte(`{"name":"sh__gone","arguments":{}}`)}, st)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, _, err := st.Wait(ctx, 0)
	if err != nil || len(events) != 1 {
		t.Fatalf("no answer: %v", err)
	}
	answer, err := jsonrpc.Parse(events[0].Data)
	if err != nil || answer.Error == nil || !strings.Contains(string(answer.Error), "unknown tool") {
		t.Fatalf("answer %s; want an unknown tool error", events[0].Data)
	}
}
