package backend

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// nopHandler drops what a child sends on its own.
type nopHandler struct{}

func (nopHandler) Notification(*Backend, *Conn, *jsonrpc.Message) {}
func (nopHandler) Request(*Backend, *Conn, *jsonrpc.Message)      {}

// testBackend returns a backend for argv that Run never supervises: tests
// start connections on it by hand.
func testBackend(t *testing.T, argv ...string) *Backend {
	t.Helper()
	cfg := &config.Backend{Name: "t", Command: argv[0], Args: argv[1:], Timeout: 10 * time.Second, Enabled: true, RelayClientRequests: true}
	return New(cfg, Options{
		GracePeriod:     time.Second,
		MaxMessageBytes: 1 << 20,
		Handler:         nopHandler{},
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// startConn spawns the backend's command as a raw connection without a
// handshake. The child is killed and reaped when the test ends.
func startConn(t *testing.T, b *Backend) *Conn {
	t.Helper()
	proc, err := spawn(append([]string{b.cfg.Command}, b.cfg.Args...), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(b, proc)
	c.start()
	t.Cleanup(c.kill)
	return c
}

// A call ends exactly once, by deliver or by Go's error, even when the child
// exits while calls are being sent: fail can take the pending map between
// Go's insert and its clean-up after a failed send.
func TestConnCallEndsExactlyOnceWhenChildExits(t *testing.T) {
	b := testBackend(t, "true")
	const iterations, callers = 300, 8
	var twice, never atomic.Int64
	for range iterations {
		c := startConn(t, b)
		var wg sync.WaitGroup
		ends := make([]atomic.Int32, callers*4)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 4 {
					n := &ends[i*4+j]
					_, err := c.Go(context.Background(), "ping", nil, nil, func(*jsonrpc.Message, error) { n.Add(1) })
					if err != nil {
						n.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		<-c.Done()
		for i := range ends {
			switch ends[i].Load() {
			case 0:
				never.Add(1)
			case 1:
			default:
				twice.Add(1)
			}
		}
	}
	if twice.Load() > 0 || never.Load() > 0 {
		t.Errorf("of %d calls on exiting children, %d ended twice and %d never", iterations*callers*4, twice.Load(), never.Load())
	}
}
