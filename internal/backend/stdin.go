package backend

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxQueued bounds the messages waiting for a child that does not read its
// input: a call waits (until its timeout) when that many are queued, an
// answer or a cancellation is dropped.
const maxQueued = 256

// stdin writes messages to a child's standard input from the goroutines
// that send them: the caller writes under the connection's lock, without
// waking another goroutine, as long as the pipe takes the bytes at once.
// Messages sent while another caller is writing are queued and written by
// that caller in the same system call (a batch). Only when the pipe is full
// does the rest go to the connection's writer goroutine, which waits for
// the child to read; a sender never blocks on a child that stopped reading,
// beyond waiting for room in the queue.
//
// At most one goroutine writes to the pipe at a time: owner says which.
type stdin struct {
	f    *os.File
	raw  syscall.RawConn
	kick chan struct{} // hands the pipe to the writer goroutine

	mu       sync.Mutex
	owner    int    // who writes: ownerNone, ownerCaller or ownerWriter
	queue    []byte // messages not yet handed to write(2), each with its newline
	spare    []byte // the last written buffer, reused for the next queue
	queued   int    // messages in queue
	room     chan struct{}
	stopping bool // stdin is to be closed: no new message is accepted
	failed   bool // a write failed: the child is gone, messages are dropped

	// Scratch of the non-blocking write, set under mu by the owner.
	buf     []byte
	n       int
	err     error
	writeFn func(fd uintptr) bool // w.writeNow as a func, made once
}

const (
	ownerNone = iota
	ownerCaller
	ownerWriter
)

func newStdin(f *os.File) *stdin {
	w := &stdin{f: f, kick: make(chan struct{}, 1), room: make(chan struct{})}
	w.raw, _ = f.SyscallConn() // a pipe from os.Pipe is non-blocking and has one
	w.writeFn = w.writeNow
	return w
}

// writeNow writes w.buf without waiting for the pipe to have room.
func (w *stdin) writeNow(fd uintptr) bool {
	w.n, w.err = 0, nil
	for w.n < len(w.buf) {
		n, err := unix.Write(int(fd), w.buf[w.n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.err = err
			break
		}
		w.n += n
	}
	return true // never wait: a full pipe is the writer goroutine's job
}

// send queues msg, appending it with the caller's append function (which
// must append exactly one message without a line break), and writes the
// queue unless another goroutine is writing it. With wait false a full
// queue drops the message and send reports errQueueFull; with wait true the
// caller waits for room until ctx ends, the child exits or stdin is closed.
func (w *stdin) send(ctx context.Context, wait bool, exited <-chan struct{}, appendMsg func([]byte) []byte) error {
	w.mu.Lock()
	for w.queued >= maxQueued && w.owner != ownerNone && !w.stopping && !w.failed {
		if !wait {
			w.mu.Unlock()
			return errQueueFull
		}
		room := w.room
		w.mu.Unlock()
		select {
		case <-room:
		case <-exited:
			return ErrGone
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
	}
	switch {
	case w.stopping:
		w.mu.Unlock()
		return ErrGone
	case w.failed:
		w.mu.Unlock()
		return nil // the child is gone: its exit fails the calls
	}
	w.queue = append(appendMsg(w.queue), '\n')
	w.queued++
	if w.owner != ownerNone {
		w.mu.Unlock()
		return nil // the owner writes it with what it writes next
	}
	w.owner = ownerCaller
	w.flushLocked()
	w.mu.Unlock()
	return nil
}

// errQueueFull reports a message dropped because the child's queue is full.
var errQueueFull = errors.New("the queue to the child is full")

// flushLocked writes the queue without blocking, as long as the pipe takes
// it, and then gives up ownership; what the pipe does not take goes to the
// writer goroutine. It runs under mu and releases it during write(2), so
// that messages sent meanwhile join the queue and go out in the next
// write: several callers at once make one system call, not one each.
func (w *stdin) flushLocked() {
	for len(w.queue) > 0 && !w.failed {
		w.buf = w.queue
		w.queue, w.spare, w.queued = w.spare[:0], nil, 0
		w.signalRoom()
		w.mu.Unlock()
		if w.raw == nil || w.raw.Write(w.writeFn) != nil {
			w.err = unix.EBADF // closed meanwhile
		}
		w.mu.Lock()
		switch {
		case w.err == unix.EAGAIN:
			// The pipe is full: the rest, then what came meanwhile, goes
			// to the writer goroutine, which waits for the child to read.
			rest := w.buf[w.n:]
			if len(w.queue) > 0 {
				rest = append(rest, w.queue...)
			}
			w.queue, w.buf = rest, nil
			w.owner = ownerWriter
			w.kickWriter()
			return
		case w.err != nil:
			w.fail()
		default:
			w.keep(w.buf)
		}
		w.buf = nil
	}
	if w.stopping {
		w.owner = ownerWriter // the writer goroutine closes stdin
		w.kickWriter()
		return
	}
	w.owner = ownerNone
}

// keep reuses a written buffer for the next queue, unless a large message
// made it large: a connection does not hold on to its largest request.
func (w *stdin) keep(buf []byte) {
	if cap(buf) <= 64<<10 {
		w.spare = buf[:0]
	}
}

func (w *stdin) kickWriter() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// fail drops what is queued and everything sent later: the child cannot
// read any more.
func (w *stdin) fail() {
	w.failed = true
	w.queue, w.spare, w.queued = nil, nil, 0
	w.signalRoom()
}

func (w *stdin) signalRoom() {
	close(w.room)
	w.room = make(chan struct{})
}

// run is the writer goroutine: it writes what a full pipe left over,
// waiting for the child to read, and closes stdin once closeStdin is
// closed and everything queued is written. It returns when the child has
// exited or stdin is closed.
func (w *stdin) run(c *Conn) {
	defer w.f.Close()
	closing := c.closeStdin
	for {
		select {
		case <-w.kick:
		case <-closing:
			closing = nil
			w.mu.Lock()
			w.stopping = true
			mine := w.owner == ownerNone
			if mine {
				w.owner = ownerWriter
			}
			w.mu.Unlock()
			if !mine {
				continue // the owner hands the pipe over when it is done
			}
		case <-c.exited:
			return
		}
		if w.drain(c) {
			return
		}
	}
}

// drain writes the queue, waiting for the pipe, until it is empty; then it
// gives up ownership, or closes stdin and reports true when stopping.
func (w *stdin) drain(c *Conn) (closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) > 0 && !w.failed {
		buf := w.queue
		w.queue, w.spare, w.queued = w.spare[:0], nil, 0 // spare is the queue now, not a buffer to reuse
		w.signalRoom()
		w.mu.Unlock()
		_, err := w.f.Write(buf) // waits for the child to read
		w.mu.Lock()
		if err != nil {
			c.log.Debug("write to child failed", "err", err)
			w.fail()
			break
		}
		w.keep(buf)
	}
	if w.stopping || w.failed {
		return true
	}
	w.owner = ownerNone
	return false
}

// stopWaiting ends a write that waits for a child that has exited: a
// process that left its group may still hold the pipe open without
// reading.
func (w *stdin) stopWaiting() {
	w.f.SetWriteDeadline(time.Unix(1, 0))
}
