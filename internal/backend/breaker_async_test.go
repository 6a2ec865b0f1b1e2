package backend

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// The gateway's own requests (logging/setLevel, an unsubscribe) meet the
// circuit breaker as calls do: while the circuit is open they are refused
// at once and never reach the child.
func TestAsyncRefusedWhileTheCircuitIsOpen(t *testing.T) {
	record := filepath.Join(t.TempDir(), "stdin")
	b := testBackend(t, "sh", "-c", `cat > "$0"`, record)
	c := startConn(t, b)
	b.mon.mu.Lock()
	b.mon.openSince, b.mon.retryAt = time.Now(), time.Now().Add(time.Hour)
	b.mon.open.Store(true)
	b.mon.mu.Unlock()

	done := make(chan error, 1)
	c.Async("logging/setLevel", []byte(`{"level":"debug"}`), time.Minute, func(_ *jsonrpc.Message, err error) { done <- err })
	var refused *RefusedError
	if err := <-done; !errors.As(err, &refused) || refused.State != Unhealthy {
		t.Fatalf("Async while the circuit is open ended with %v; want a refusal", err)
	}
	n := 0
	c.Calls(func(*Call) { n++ })
	if n != 0 {
		t.Errorf("%d calls pending: the request went to the child", n)
	}
	c.shutdown(time.Minute) // cat ends at the end of its input, with all it read written
	if got, _ := os.ReadFile(record); strings.Contains(string(got), "logging/setLevel") {
		t.Errorf("the child received %s", got)
	}
}
