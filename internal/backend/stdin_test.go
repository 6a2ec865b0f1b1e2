package backend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// pipeConn returns a connection whose child input is a pipe the test
// reads, with the writer goroutine running until the test ends.
func pipeConn(t *testing.T) (*Conn, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &Conn{in: newStdin(w), closeStdin: make(chan struct{}), exited: make(chan struct{}), log: slog.New(slog.DiscardHandler)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.in.run(c)
	}()
	t.Cleanup(func() {
		c.closeOnce.Do(func() { close(c.closeStdin) })
		r.Close() // a writer still waiting for the reader fails now
		<-done
	})
	return c, r
}

// pipeStdin returns a stdin on a pipe nobody reads, without its writer
// goroutine: what the pipe does not take stays queued.
func pipeStdin(t *testing.T) *stdin {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return newStdin(w)
}

// Messages sent from many goroutines while the child does not read reach it
// whole, each sender's in order, once it reads: the senders write what the
// pipe takes, the writer goroutine the rest, and a full queue makes senders
// wait rather than drop requests. Closing stdin writes everything queued
// before EOF.
func TestStdinDeliversEveryMessageWholeAndInOrder(t *testing.T) {
	c, r := pipeConn(t)
	// 16 MB: many times what a pipe holds, and a queue that grows past
	// what the writer keeps for reuse (once a write of such a queue reused
	// it for the next, overwriting what was being written).
	const senders, each = 16, 100
	small, large := strings.Repeat("x", 1000), strings.Repeat("y", 70<<10)
	pad := func(s, i int) string {
		if s == 0 && i%10 == 0 {
			return large
		}
		return small
	}
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := c.send(context.Background(), fmt.Appendf(nil, "%d %d %s", s, i, pad(s, i))); err != nil {
					t.Errorf("send: %v", err)
					return
				}
			}
		}()
	}
	sent := make(chan struct{})
	go func() {
		wg.Wait()
		c.closeOnce.Do(func() { close(c.closeStdin) })
		close(sent)
	}()
	// The child reads only once the queue is full: the writer goroutine
	// then writes queues larger than it keeps for reuse.
	for full := false; !full; runtime.Gosched() {
		c.in.mu.Lock()
		full = c.in.queued >= maxQueued
		c.in.mu.Unlock()
	}
	next := make([]int, senders)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		var s, i int
		var rest string
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %s", &s, &i, &rest); err != nil || rest != pad(s, i) {
			t.Fatalf("line %d is not a whole message: %.60q", lines, sc.Text())
		}
		if i != next[s] {
			t.Fatalf("sender %d: message %d came after %d", s, i, next[s]-1)
		}
		next[s]++
		lines++
	}
	<-sent
	if lines != senders*each {
		t.Errorf("read %d messages, want %d", lines, senders*each)
	}
}

// A call whose child does not read its input waits for room in the queue
// until its context ends, with an error that says so; an answer the child
// would get is dropped at once rather than stalling its sender.
func TestStdinFullQueue(t *testing.T) {
	c, _ := pipeConn(t)
	msg := []byte(strings.Repeat("y", 4096))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var err error
	for range 10 * maxQueued { // the pipe takes 16 of them, the queue maxQueued
		if err = c.in.send(ctx, true, c.exited, func(dst []byte) []byte { return append(dst, msg...) }); err != nil {
			break
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send to a child that does not read: %v, want the deadline", err)
	}
	if err := c.in.send(context.Background(), false, c.exited, func(dst []byte) []byte { return append(dst, msg...) }); !errors.Is(err, errQueueFull) {
		t.Errorf("trySend to a full queue: %v, want errQueueFull", err)
	}
	close(c.exited) // the child is gone: waiting senders give up
	if err := c.in.send(context.Background(), true, c.exited, func(dst []byte) []byte { return append(dst, msg...) }); !errors.Is(err, ErrGone) {
		t.Errorf("send after the child exited: %v, want ErrGone", err)
	}
}

// Queueing a message never copies the messages queued before it: a child
// slow to read a few large requests once cost each new one a copy of all
// of them. (No writer goroutine runs: what the pipe does not take stays
// queued.)
func TestStdinQueueingDoesNotCopyTheQueue(t *testing.T) {
	w := pipeStdin(t)
	large := []byte(strings.Repeat("z", 1<<20))
	send := func() {
		if err := w.send(context.Background(), true, nil, func(dst []byte) []byte { return append(dst, large...) }); err != nil {
			t.Fatal(err)
		}
	}
	send() // the pipe takes 64 KiB of it; the rest is queued
	send()
	queued := &w.segs[len(w.segs)-1][0]
	send()
	if len(w.segs) != 3 || &w.segs[1][0] != queued {
		t.Errorf("queueing a large request copied the one queued before it (%d segments)", len(w.segs))
	}
}

// Every small segment of a written batch is kept for the messages queued
// while a later batch is written, up to maxFree of them; a large one is
// not kept.
func TestStdinReusesWrittenSegments(t *testing.T) {
	w := pipeStdin(t)
	var written [][]byte
	for range maxFree + 1 {
		written = append(written, make([]byte, 100, 4096))
	}
	written = append([][]byte{make([]byte, 100, segmentSize+1)}, written...)
	w.mu.Lock()
	w.keep(written)
	w.mu.Unlock()
	if len(w.free) != maxFree || cap(w.free[0]) != 4096 || len(w.free[0]) != 0 {
		t.Fatalf("kept %d segments (first of cap %d), want %d small ones, emptied", len(w.free), cap(w.free[0]), maxFree)
	}
	w.owner = ownerCaller // another caller writes: a message sent now is queued
	if err := w.send(context.Background(), false, nil, func(dst []byte) []byte { return append(dst, "m"...) }); err != nil {
		t.Fatal(err)
	}
	if len(w.segs) != 1 || cap(w.segs[0]) != 4096 || len(w.free) != maxFree-1 {
		t.Errorf("the queued message took a segment of cap %d, %d kept left; want a kept one", cap(w.segs[0]), len(w.free))
	}
}
