package gateway

import (
	"context"
	"testing"
)

// TestStreamAnswerAllocations is the budget of a request's stream carrying
// its one answer: the stream, its wake channel and its list of events.
// The final push wakes the waiter without making a channel nobody waits
// on, and Wait still sees the end.
func TestStreamAnswerAllocations(t *testing.T) {
	data := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	var s *Stream
	n := testing.AllocsPerRun(100, func() {
		s = newStream(1, false, 0)
		s.push(data, true)
	})
	if n > 3 {
		t.Errorf("a stream with its answer takes %v allocations, want 3", n)
	}
	events, done, err := s.Wait(context.Background(), 0)
	if err != nil || !done || len(events) != 1 {
		t.Fatalf("Wait = %d events, done %v, %v; want the answer and the end", len(events), done, err)
	}
	if _, done, _ := s.Wait(context.Background(), 1); !done {
		t.Error("Wait after the answer does not report the end")
	}
}
