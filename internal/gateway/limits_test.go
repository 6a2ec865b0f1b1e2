package gateway_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// noBackends is a registry without backends: sessions need none.
type noBackends struct{}

func (noBackends) Backends() []*backend.Backend    { return nil }
func (noBackends) Backend(string) *backend.Backend { return nil }

// Concurrent initializes never overshoot max_sessions: exactly the bound
// succeeds, the rest get CodeOverloaded, and an ended session frees its
// slot.
func TestMaxSessionsUnderConcurrentInitializes(t *testing.T) {
	const max, tries = 10, 100
	g := gateway.New(noBackends{}, gateway.Options{MaxSessions: max, Logger: slog.New(slog.DiscardHandler)})
	defer g.Close()
	var ok, refused atomic.Int64
	var ids sync.Map
	var wg sync.WaitGroup
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _, err := g.NewSession(nil, nil, "")
			switch {
			case err == nil:
				ok.Add(1)
				ids.Store(s.ID, true)
			case jsonrpc.AsError(err).Code == gateway.CodeOverloaded:
				refused.Add(1)
			default:
				t.Errorf("NewSession: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != max || refused.Load() != tries-max || g.NumSessions() != max {
		t.Fatalf("%d sessions made, %d refused, %d open; want %d, %d, %d", ok.Load(), refused.Load(), g.NumSessions(), max, tries-max, max)
	}
	ids.Range(func(id, _ any) bool {
		g.CloseSession(id.(string), "test")
		return false // one
	})
	if _, _, err := g.NewSession(nil, nil, ""); err != nil {
		t.Errorf("NewSession after one ended: %v", err)
	}
}

// A session that sends nothing ends after the idle timeout, even one of a
// few nanoseconds (which once made the expiry ticker panic).
func TestTinySessionIdleTimeout(t *testing.T) {
	g := gateway.New(noBackends{}, gateway.Options{SessionIdleTimeout: 3, Logger: slog.New(slog.DiscardHandler)})
	defer g.Close()
	s, _, err := g.NewSession(nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// The session's standalone stream ends when the session does.
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	for {
		_, finished, err := s.Standalone().Wait(wctx, 1<<62)
		if err != nil {
			t.Fatal("the idle session did not end within 30s")
		}
		if finished {
			break
		}
	}
	if g.Session(s.ID) != nil {
		t.Error("the session ended but can still be found")
	}
}
