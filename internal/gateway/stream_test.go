package gateway

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// drain reads st from after until it ends, as a connection writing it does.
func drain(t testing.TB, st *Stream, after int64) []Event {
	var all []Event
	for {
		events, done, err := st.Wait(context.Background(), after)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, events...)
		if len(events) > 0 {
			after = events[len(events)-1].Seq
		}
		if done {
			return all
		}
	}
}

// Every message is one line of the event stream, whatever whitespace the
// backend wrote between its tokens.
func TestStreamEventsAreSingleLines(t *testing.T) {
	st := newStream(1, false, 0)
	st.push([]byte("{\"jsonrpc\":\"2.0\",\r\"method\":\"notifications/message\",\n\"params\":{\"data\":\"a\\r\\nb\"}}"), false)
	st.push([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\r\n\"result\":{}}"), true)
	for _, e := range drain(t, st, 0) {
		if bytes.ContainsAny(e.Data, "\r\n") {
			t.Errorf("event %d holds a line break: %q", e.Seq, e.Data)
		}
	}
}

// A chatty request keeps at most maxEvents events for resumption, and
// never loses its response.
func TestStreamKeepsABoundedWindowAndTheResponses(t *testing.T) {
	st := newStream(1, false, 100)
	st.finalsLeft = 2 // a batch of two
	st.push([]byte(`{"id":1,"result":{}}`), true)
	for i := range 10000 {
		st.push(fmt.Appendf(nil, `{"method":"notifications/progress","params":{"progress":%d}}`, i), false)
	}
	if n := st.retained(); n > 101 {
		t.Errorf("the stream holds %d events after 10001; want at most 100 and the response", n)
	}
	st.push([]byte(`{"id":2,"result":{}}`), true)
	events := drain(t, st, 0)
	if len(events) != 101 || !events[0].Final || events[0].Seq != 1 || !events[100].Final || events[99].Seq != 10001 {
		t.Errorf("a client resuming from the start gets %d events, first %+v, last %+v", len(events), events[0], events[len(events)-1])
	}
}

// What a client confirmed it has, by resuming after it, is released.
func TestStreamReleasesWhatTheClientHas(t *testing.T) {
	sess := &Session{streams: map[int64]*Stream{}}
	st := newStream(1, false, 0)
	sess.streams[1] = st
	for i := range 50 {
		st.push(fmt.Appendf(nil, `{"n":%d}`, i), false)
	}
	if _, after, ok := sess.ResumeStream("1-30"); !ok || after != 30 {
		t.Fatalf("ResumeStream = %d, %v", after, ok)
	}
	if n := st.retained(); n != 20 {
		t.Errorf("the stream holds %d events after the client resumed after 30 of 50; want 20", n)
	}
	events, _, _ := st.Wait(context.Background(), 30)
	if len(events) != 20 || events[0].Seq != 31 {
		t.Errorf("resuming after 30 gives %d events from %d", len(events), events[0].Seq)
	}
}

// BenchmarkStreamPerEvent drives a request's stream alone, as a chatty tool
// does with a client that keeps up: each event is pushed, then read. The
// cost per event must not grow with the events sent before it.
func BenchmarkStreamPerEvent(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`)
	ctx := context.Background()
	for _, n := range []int{20000, 40000, 80000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			start := time.Now()
			for range b.N {
				st := newStream(1, false, 0)
				for i := range n {
					st.push(msg, i == n-1)
					if _, _, err := st.Wait(ctx, int64(i)); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}
