package gateway_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// inProcess runs a gateway in this process in front of the fake server as
// backend "s", and returns a session on it. Everything stops when the test
// ends.
func inProcess(t testing.TB) *gateway.Session {
	t.Helper()
	s, _, err := inProcessGateway(t).NewSession(nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// roundTrip sends one tools/call through s and waits for its answer.
func roundTrip(t testing.TB, s *gateway.Session, msg *jsonrpc.Message) []byte {
	st := s.NewStream(1, false)
	st.Attach()
	s.HandleRequest(msg, st)
	events, _, err := st.Wait(context.Background(), 0)
	if err != nil || len(events) != 1 {
		t.Fatalf("no answer: %v", err)
	}
	st.Detach(0)
	return events[0].Data
}

// Allocation budgets of a tools/call through the gateway to a child and
// back (the HTTP front aside): routing, admission, the write to the child,
// reading and matching its answer, and the response on the client's
// stream. A change that allocates more per call fails here; one that
// allocates less should lower the budget.
func TestToolCallAllocationBudget(t *testing.T) {
	s := inProcess(t)
	msg := &jsonrpc.Message{JSONRPC: "2.0", ID: []byte(`7`), Method: "tools/call",
		Params: []byte(`{"name":"s__echo","arguments":{"text":"` + strings.Repeat("x", 1024) + `"}}`)}
	if resp := roundTrip(t, s, msg); !strings.Contains(string(resp), `"id":7,`) || !strings.Contains(string(resp), strings.Repeat("x", 1024)) {
		t.Fatalf("answer %s", resp)
	}
	const budget = 14
	got := testing.AllocsPerRun(200, func() { roundTrip(t, s, msg) })
	t.Logf("%.1f allocations per tools/call (budget %d)", got, budget)
	if got > budget {
		t.Errorf("a tools/call allocates %.1f times, over its budget of %d", got, budget)
	}
}

// BenchmarkToolCallInProcess measures a 1 KiB tools/call through an
// in-process gateway to the fake server, sequentially and from 64
// goroutines at once. cpu-ns/op is this process's CPU time (user and
// system) per call: the gateway's and the backend connection's, not the
// child's.
func BenchmarkToolCallInProcess(b *testing.B) {
	s := inProcess(b)
	msg := &jsonrpc.Message{JSONRPC: "2.0", ID: []byte(`7`), Method: "tools/call",
		Params: []byte(`{"name":"s__echo","arguments":{"text":"` + strings.Repeat("x", 1024) + `"}}`)}
	b.Run("sessions=1", func(b *testing.B) {
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			roundTrip(b, s, msg)
		}
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	})
	b.Run("sessions=64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(32) // 64 goroutines on 2 CPUs
		start := cpuTime()
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			// Each goroutine its own id: a second request with the id of
			// one in flight is refused, which would measure the refusal.
			mine := *msg
			mine.ID = strconv.AppendInt(nil, 1000+next.Add(1), 10)
			for pb.Next() {
				roundTrip(b, s, &mine)
			}
		})
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	})
}

// cpuTime returns the CPU time this process has used, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// A large result is held once: the line read from the child, moved out of
// the pipe's buffer without being kept twice, is the response the client
// gets, under its id, without another copy. The bytes allocated for a call
// are the response's size and the first 2 MiB of it (they were three
// times its size).
func TestLargeResultIsHeldOnce(t *testing.T) {
	s := inProcess(t)
	msg := &jsonrpc.Message{JSONRPC: "2.0", ID: []byte(`"a-client-id-longer-than-ours"`), Method: "tools/call",
		Params: []byte(`{"name":"s__huge","arguments":{"bytes":8388608}}`)}
	size := len(roundTrip(t, s, msg)) // warm-up: the stream, the connection's buffers
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp := roundTrip(t, s, msg)
	runtime.ReadMemStats(&after)
	if !strings.HasPrefix(string(resp), `{"jsonrpc":"2.0","id":"a-client-id-longer-than-ours",`) {
		t.Fatalf("answer starts %.80s", resp)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes allocated for a response of %d bytes", allocated, size)
	// The line's first 2 MiB are copied on the heap before it leaves it
	// (jsonrpc's spillAbove); the rest is allocated once.
	if allocated > uint64(size)+2<<20+uint64(size)/16 {
		t.Errorf("%d bytes allocated for a response of %d bytes: the result is held more than once", allocated, size)
	}
}

// TestIdleSessionMemoryBudget holds what an idle session keeps on the
// heap: the session, its standalone stream and its entry in the session
// table. Its maps are made when first written, and what only a stateless
// request's context needs is not in it. A change that makes an idle
// session keep more fails here; one that keeps less should lower the
// budget.
func TestIdleSessionMemoryBudget(t *testing.T) {
	g := inProcessGateway(t)
	client := access.Anonymous() // as the front passes every session of auth = "none"
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // the second also frees what the first finalized
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n, budget = 10000, 900
	sessions := make([]*gateway.Session, 0, n)
	before := heap()
	for range n {
		s, _, err := g.NewSession([]byte(`{"protocolVersion":"2025-06-18","capabilities":{}}`), client, "")
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	got := float64(heap()-before)/n - 8 // a pointer of sessions' own
	runtime.KeepAlive(sessions)
	t.Logf("an idle session keeps %.0f bytes (budget %d)", got, budget)
	if got > budget {
		t.Errorf("an idle session keeps %.0f bytes of heap, over its budget of %d", got, budget)
	}
}
