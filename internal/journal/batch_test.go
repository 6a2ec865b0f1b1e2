package journal

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// gatedWriter records each Write as one batch; while gate is open (not
// nil), the first Write waits for it to be closed.
type gatedWriter struct {
	gate    chan struct{}
	entered chan struct{} // closed when the first Write begins

	mu      sync.Mutex
	batches [][]byte
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	first := len(g.batches) == 0
	g.batches = append(g.batches, bytes.Clone(p))
	g.mu.Unlock()
	if first && g.gate != nil {
		close(g.entered)
		<-g.gate
	}
	return len(p), nil
}

func (g *gatedWriter) all() ([][]byte, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.batches, string(bytes.Join(g.batches, nil))
}

// Records written at once by many goroutines all arrive, whole, each
// goroutine's in the order it wrote them, and Close returns once they are
// written.
func TestBatchWriterKeepsEveryRecordInOrder(t *testing.T) {
	g := &gatedWriter{}
	b := newBatchWriter(g)
	const writers, each = 8, 500
	var wg sync.WaitGroup
	record := func(w, i int) string { return fmt.Sprintf("writer=%d record=%d %s", w, i, strings.Repeat("x", i%97)) }
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				fmt.Fprintln(b, record(w, i))
			}
		})
	}
	wg.Wait()
	b.Close()
	_, out := g.all()
	next := make([]int, writers)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines {
		var w int
		if _, err := fmt.Sscanf(l, "writer=%d", &w); err != nil || w < 0 || w >= writers {
			t.Fatalf("line %q: not a record", l)
		}
		if want := record(w, next[w]); l != want {
			t.Fatalf("line %q, want %q", l, want)
		}
		next[w]++
	}
	if len(lines) != writers*each {
		t.Errorf("%d lines, want %d", len(lines), writers*each)
	}
}

// While a write is under way, records queue up to maxBatch; the writer of
// a record that would pass it waits for room, and its record is not lost:
// a stalled reader of stderr holds the daemon no longer than without the
// batching.
func TestBatchWriterWaitsForRoom(t *testing.T) {
	g := &gatedWriter{gate: make(chan struct{}), entered: make(chan struct{})}
	b := newBatchWriter(g)
	waiting := make(chan struct{})
	b.onWait = sync.OnceFunc(func() { close(waiting) })
	record := []byte(strings.Repeat("r", 1023) + "\n")
	b.Write([]byte("first\n"))
	<-g.entered // the flusher is in its first write, which blocks
	for range maxBatch / len(record) {
		b.Write(record) // queue up to the bound without waiting
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		b.Write([]byte("last\n"))
	}()
	select {
	case <-waiting: // the writer of one record more waits
	case <-wrote:
		t.Fatal("a record past maxBatch was queued without waiting")
	}
	close(g.gate)
	<-wrote
	b.Close()
	batches, out := g.all()
	if len(batches) != 3 || len(batches[1]) != maxBatch || string(batches[2]) != "last\n" {
		sizes := []int{}
		for _, x := range batches {
			sizes = append(sizes, len(x))
		}
		t.Errorf("batches of %v bytes, want [6 %d 5]", sizes, maxBatch)
	}
	if want := "first\n" + strings.Repeat(string(record), maxBatch/len(record)) + "last\n"; out != want {
		t.Errorf("wrote %d bytes, want %d in order", len(out), len(want))
	}
}

// After Close, a record is written directly, after everything queued.
func TestBatchWriterAfterClose(t *testing.T) {
	g := &gatedWriter{}
	b := newBatchWriter(g)
	b.Write([]byte("queued\n"))
	b.Close()
	b.Write([]byte("after\n"))
	if _, out := g.all(); out != "queued\nafter\n" {
		t.Errorf("wrote %q", out)
	}
	b.Close() // a second Close does nothing
}
