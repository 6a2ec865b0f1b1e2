package backend

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
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
func (nopHandler) Exited(*Backend, *Conn)                         {}

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
	proc, err := spawn(append([]string{b.cfg.Command}, b.cfg.Args...), nil, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(b, proc)
	c.start()
	t.Cleanup(func() {
		select {
		case <-c.Done():
		default:
			c.kill()
		}
	})
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

// An oversized request from the child carries an id of the child's own id
// space: it must not settle the gateway's call with the same number, and
// the child gets an error response instead of silence.
func TestConnOversizedRequestFromChildGetsAnErrorResponse(t *testing.T) {
	// The child answers call 1 with the reply it got to its own request 1.
	b := testBackend(t, "sh", "-c", `read -r req
big=$(head -c 5000 /dev/zero | tr '\0' x)
printf '{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"x":"%s"}}\n' "$big"
read -r reply
printf '{"jsonrpc":"2.0","id":1,"result":{"reply":%s}}\n' "$reply"
cat >/dev/null`)
	b.opts.MaxMessageBytes = 4096
	c := startConn(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Call(ctx, "tools/call", nil)
	if err != nil {
		t.Fatalf("call 1 ended with %v; the child's oversized request 1 must not settle it", err)
	}
	var got struct {
		Reply struct {
			ID    json.RawMessage `json:"id"`
			Error *jsonrpc.Error  `json:"error"`
		} `json:"reply"`
	}
	if err := json.Unmarshal(res, &got); err != nil || string(got.Reply.ID) != "1" || got.Reply.Error == nil || got.Reply.Error.Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("the child's request got %s (%v); want an error response -32600 to id 1", res, err)
	}
	if !strings.Contains(got.Reply.Error.Message, "4096") {
		t.Errorf("error %q does not name the limit", got.Reply.Error.Message)
	}
}

// A call the gateway makes on its own ends at its deadline when the child
// never answers, and leaves nothing pending.
func TestConnAsyncEndsAtItsDeadline(t *testing.T) {
	c := startConn(t, testBackend(t, "sh", "-c", "cat >/dev/null"))
	done := make(chan error, 2)
	c.Async("logging/setLevel", []byte(`{"level":"debug"}`), 50*time.Millisecond, func(_ *jsonrpc.Message, err error) { done <- err })
	if err := <-done; !errors.Is(err, ErrTimeout) {
		t.Fatalf("Async ended with %v; want ErrTimeout", err)
	}
	n := 0
	c.Calls(func(*Call) { n++ })
	if n != 0 {
		t.Errorf("%d calls still pending after the deadline", n)
	}
	c.kill()
	select {
	case err := <-done:
		t.Errorf("the call ended a second time, with %v, when the child died", err)
	default:
	}
}

// A call abandoned while its response is arriving ends once: either
// Abandon wins and the response is dropped, or deliver runs and Abandon
// reports that it came too late.
func TestConnAbandonRacesTheResponse(t *testing.T) {
	// Answers every request at once; notifications (no id) are skipped.
	c := startConn(t, testBackend(t, "sh", "-c", `while read -r l; do
case "$l" in *'"id":'*) id=${l#*'"id":'}; echo "{\"jsonrpc\":\"2.0\",\"id\":${id%%,*},\"result\":{}}";; esac
done`))
	const calls = 2000
	delivered := make([]atomic.Int32, calls)
	abandoned := make([]bool, calls)
	var wg sync.WaitGroup
	for i := range calls {
		n := &delivered[i]
		call, err := c.Go(context.Background(), "ping", nil, nil, func(*jsonrpc.Message, error) { n.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			abandoned[i] = c.Abandon(call, "test")
		}()
	}
	wg.Wait()
	c.closeOnce.Do(func() { close(c.closeStdin) }) // the child ends at EOF
	<-c.Done()
	won := 0
	for i := range calls {
		if abandoned[i] {
			won++
		}
	}
	t.Logf("Abandon won %d of %d races", won, calls)
	for i := range calls {
		if got, want := delivered[i].Load(), int32(0); !abandoned[i] {
			want = 1
			if got != want {
				t.Errorf("call %d: Abandon lost, deliver ran %d times; want once", i, got)
			}
		} else if got != want {
			t.Errorf("call %d: Abandon won, deliver ran %d times; want never", i, got)
		}
	}
}
