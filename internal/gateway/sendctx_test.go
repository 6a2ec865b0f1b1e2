package gateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSendContext: the lazy context ends at its deadline like
// context.WithTimeout's, is cancelled by stop, and makes no timer (no
// allocation past itself) when nothing waits on it.
func newSendContext(timeout time.Duration) *sendContext {
	return &sendContext{deadline: time.Now().Add(timeout)}
}

func TestSendContext(t *testing.T) {
	c := newSendContext(time.Millisecond)
	if d, ok := c.Deadline(); !ok || d.IsZero() {
		t.Fatalf("Deadline() = %v, %v", d, ok)
	}
	<-c.Done() // ends: the test would time out otherwise
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("Err() after the deadline = %v", c.Err())
	}
	c.stop()

	c = newSendContext(time.Hour)
	if c.Err() != nil {
		t.Errorf("Err() before the deadline = %v", c.Err())
	}
	c.stop()
	<-c.Done()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("Err() after stop = %v", c.Err())
	}

	c = newSendContext(time.Hour)
	c.stop() // never waited on
	<-c.Done()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("Err() after stop, unused = %v", c.Err())
	}

	var sc sendContext
	if n := testing.AllocsPerRun(100, func() {
		sc = sendContext{deadline: time.Now().Add(time.Hour)}
		sc.stop()
	}); n != 0 {
		t.Errorf("an unused send context allocates %v times, want 0", n)
	}
}
