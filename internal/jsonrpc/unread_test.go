package jsonrpc

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// A reader stopped by a read deadline hands on every byte it read and did
// not return: the start of the line it was in, and what it had buffered,
// also of a line longer than its buffer.
func TestUnreadAfterDeadline(t *testing.T) {
	long := `{"x":"` + strings.Repeat("a", 100<<10) // longer than the 64 KiB buffer
	for _, tt := range []struct{ name, written, want string }{
		{"mid-line", "{\"a\":1}\n{\"b\":", `{"b":`},
		{"at a boundary", "{\"a\":1}\n", ""},
		{"a long line", "{\"a\":1}\n" + long, long},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			release := make(chan struct{})
			go func() {
				w.WriteString(tt.written)
				<-release // an EOF now would end the line: close after the deadline
				w.Close()
			}()
			lr := NewLineReader(r, 1<<20)
			if line, err := lr.Next(); err != nil || string(line) != `{"a":1}` {
				t.Fatalf("Next = %q, %v", line, err)
			}
			// A deadline interrupts the next line wherever it is: what the
			// reader took and what is still in the pipe make the rest.
			r.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if line, err := lr.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
				close(release)
				t.Fatalf("Next = %.60q, %v; want the deadline", line, err)
			}
			close(release)
			r.SetReadDeadline(time.Time{})
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(lr.Unread()) + string(rest); got != tt.want {
				t.Errorf("Unread = %.40q (%d bytes), want %.40q (%d bytes)", got, len(got), tt.want, len(tt.want))
			}
		})
	}
}
