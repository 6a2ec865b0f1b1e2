package journal

import (
	"io"
	"sync"
)

// maxBatch bounds what a batchWriter holds unwritten. A writer that would
// pass it waits for the write under way, as it would wait for write(2)
// itself: nothing is dropped, and a stalled reader of stderr holds the
// daemon's logging no longer than it would without the batching.
const maxBatch = 256 << 10

// A batchWriter writes what it is given to w in order, one write(2) per
// batch, from a goroutine of its own: a record written while another
// write is under way leaves with the next one, and the writer of a record
// does not wait for write(2) (the audit entry of a call is written by the
// goroutine that delivers the backend's answers). A write to a pipe costs
// more than formatting the record, most of it waking the reader.
//
// Records wait for at most one write(2) and one wake-up of the flusher:
// a crash of the daemon can lose those of the last microseconds. Close
// writes what is left; afterwards Write writes directly.
type batchWriter struct {
	w io.Writer

	mu     sync.Mutex
	room   sync.Cond // signalled after each write, and by Close
	buf    []byte    // waiting for the flusher
	spare  []byte    // the last batch's buffer, to take the next
	busy   bool      // the flusher was woken and has not yet found buf empty
	closed bool

	wake chan struct{} // capacity 1; sent to when busy becomes true
	done chan struct{} // closed when the flusher has returned

	onWait func() // for tests: called when a Write waits for room
}

func newBatchWriter(w io.Writer) *batchWriter {
	b := &batchWriter{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	b.room.L = &b.mu
	go b.flush()
	return b
}

// Write queues p for the flusher. It copies p, which slog reuses.
func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	for !b.closed && len(b.buf) > 0 && len(b.buf)+len(p) > maxBatch {
		if b.onWait != nil {
			b.onWait()
		}
		b.room.Wait()
	}
	if b.closed {
		b.mu.Unlock()
		<-b.done // after what was queued
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if !b.busy {
		b.busy = true
		b.wake <- struct{}{} // cannot block: only a false busy sends
	}
	b.mu.Unlock()
	return len(p), nil
}

// flush writes batches until Close. A write error is not reported to
// anyone: slog's handlers ignore it, and stderr has nowhere else to go.
func (b *batchWriter) flush() {
	defer close(b.done)
	for range b.wake {
		b.mu.Lock()
		for len(b.buf) > 0 {
			batch := b.buf
			b.buf, b.spare = b.spare[:0], nil
			b.mu.Unlock()
			b.w.Write(batch)
			b.mu.Lock()
			if cap(batch) <= maxBatch {
				b.spare = batch
			}
			b.room.Broadcast()
		}
		b.busy = false
		b.mu.Unlock()
	}
}

// Close writes what is queued and returns when it is written.
func (b *batchWriter) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.wake)
		b.room.Broadcast()
	}
	b.mu.Unlock()
	<-b.done
	return nil
}
