package backend

import (
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// methodsHandler sends the method of every notification a child sends.
type methodsHandler struct {
	nopHandler
	methods chan string
}

func (h methodsHandler) Notification(_ *Backend, _ *Conn, m *jsonrpc.Message) { h.methods <- m.Method }

// A connection whose readers are stopped for a handover hands on the
// bytes it read and did not handle, here half a message: read first by
// whoever takes the pipe over, they and what the child writes next make
// the whole message, and nothing is lost or read twice.
func TestStoppedReadersHandOnWhatTheyRead(t *testing.T) {
	methods := make(chan string, 4)
	b := testBackend(t, "sh", "-c", `printf '{"jsonrpc":"2.0","method":"x/one"}\n{"jsonrpc":"2.0","meth'; exec cat`)
	b.opts.Handler = methodsHandler{methods: methods}
	c := startConn(t, b)
	if m := <-methods; m != "x/one" {
		t.Fatalf("first notification %q", m)
	}
	unread, err := c.stopReading(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(unread) != `{"jsonrpc":"2.0","meth` {
		t.Fatalf("handed on %q, want the start of the second message", unread)
	}
	s := c.proc.streams()
	s.stdout.SetReadDeadline(time.Time{})
	if _, err := s.stdin.WriteString(`od":"x/two"}` + "\n"); err != nil { // cat writes it on
		t.Fatal(err)
	}
	lr := jsonrpc.NewLineReader(&prefixed{rest: unread, r: s.stdout}, 1<<20)
	line, err := lr.Next()
	if err != nil || string(line) != `{"jsonrpc":"2.0","method":"x/two"}` {
		t.Fatalf("the next reader read %q, %v; want the whole second message", line, err)
	}
	select {
	case m := <-methods:
		t.Errorf("the stopped connection still handled %q", m)
	default:
	}
}

// Pausing the input for a handover waits until what was queued is
// written, and refuses what comes after; a child that does not read makes
// it fail, and the input takes messages again.
func TestStdinPause(t *testing.T) {
	b := testBackend(t, "sh", "-c", "exec cat >/dev/null")
	c := startConn(t, b)
	if err := c.Notify(t.Context(), "x/queued", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.in.pause(10 * time.Second); err != nil {
		t.Fatalf("pause with a reading child: %v", err)
	}
	if err := c.Notify(t.Context(), "x/late", nil); err == nil {
		t.Error("a message was taken after the pause")
	}

	stuck := testBackend(t, "sleep", "1000") // never reads its input
	sc := startConn(t, stuck)
	big := make([]byte, 1<<20) // more than the pipe holds
	for i := range big {
		big[i] = 'x'
	}
	sc.trySend(jsonrpc.AppendNotification(nil, "x/big", jsonrpc.AppendString(nil, string(big))))
	if err := sc.in.pause(100 * time.Millisecond); err == nil {
		t.Fatal("pause succeeded with a child that does not read")
	}
	if err := sc.Notify(t.Context(), "x/after", nil); err != nil {
		t.Errorf("the input refused a message after a failed pause: %v", err)
	}
}
