package backend

import (
	"context"
	"errors"
	"fmt"
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
// The queue is a list of segments: small messages share one, up to
// segmentSize, and a larger message is a segment of its own, so that
// queueing a message never copies the ones queued before it.
//
// At most one goroutine writes to the pipe at a time: owner says which.
type stdin struct {
	f    *os.File
	raw  syscall.RawConn
	kick chan struct{} // hands the pipe to the writer goroutine

	mu     sync.Mutex
	owner  int           // who writes: ownerNone, ownerCaller or ownerWriter
	segs   [][]byte      // messages not yet handed to write(2), each with its newline
	queued int           // messages in segs
	free   [][]byte      // small written segments, reused for the next ones (at most maxFree)
	lists  [][]byte      // a written list of segments, reused for the next queue
	room   chan struct{} // closed when the queue has room again, if roomWanted
	// roomWanted is set by a sender waiting for room: only then does
	// signalRoom make a new channel, not on every write.
	roomWanted bool
	stopping   bool // stdin is to be closed: no new message is accepted
	failed     bool // a write failed: the child is gone, messages are dropped
	paused     bool // handed to the next mcpgated: no new message is accepted (see pause)
	// idle is signalled, under mu, whenever the pipe has no owner: what
	// pause waits for.
	idle *sync.Cond

	// Scratch of the non-blocking write, set under mu by the owner.
	out     [][]byte // the segments being written
	n       int      // bytes of them written
	err     error
	writeFn func(fd uintptr) bool // w.writeNow as a func, made once
}

// segmentSize is how large a segment small messages share may grow.
const segmentSize = 64 << 10

// maxFree is how many written segments are kept for reuse: every segment
// of a written batch, not only its first, since while one caller writes,
// the messages sent meanwhile need a segment of their own (at 64 sessions,
// a new one for more than half the calls when only one was kept). With
// segmentSize, it bounds what a connection keeps to 128 KiB.
const maxFree = 2

const (
	ownerNone = iota
	ownerCaller
	ownerWriter
)

func newStdin(f *os.File) *stdin {
	w := &stdin{f: f, kick: make(chan struct{}, 1), room: make(chan struct{})}
	w.idle = sync.NewCond(&w.mu)
	w.raw, _ = f.SyscallConn() // a pipe from os.Pipe is non-blocking and has one
	w.writeFn = w.writeNow
	return w
}

// writeNow writes w.out without waiting for the pipe to have room.
func (w *stdin) writeNow(fd uintptr) bool {
	w.n, w.err = 0, nil
	for _, seg := range w.out {
		for off := 0; off < len(seg); {
			n, err := unix.Write(int(fd), seg[off:])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				w.err = err
				return true // never wait: a full pipe is the writer goroutine's job
			}
			off += n
			w.n += n
		}
	}
	return true
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
		w.roomWanted = true
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
	case w.stopping || w.paused:
		w.mu.Unlock()
		return ErrGone
	case w.failed:
		w.mu.Unlock()
		return nil // the child is gone: its exit fails the calls
	}
	if last := len(w.segs) - 1; last >= 0 && len(w.segs[last]) < segmentSize {
		w.segs[last] = append(appendMsg(w.segs[last]), '\n')
	} else {
		var seg []byte
		if n := len(w.free); n > 0 {
			seg, w.free = w.free[n-1], w.free[:n-1]
		}
		w.segs = append(w.segs, append(appendMsg(seg[:0]), '\n'))
	}
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

// take hands the queue to its writer; the next queue is never the list
// being written.
func (w *stdin) take() [][]byte {
	out := w.segs
	w.segs, w.lists, w.queued = w.lists, nil, 0
	w.signalRoom()
	return out
}

// flushLocked writes the queue without blocking, as long as the pipe takes
// it, and then gives up ownership; what the pipe does not take goes to the
// writer goroutine. It runs under mu and releases it during write(2), so
// that messages sent meanwhile join the queue and go out in the next
// write: several callers at once make one system call, not one each.
func (w *stdin) flushLocked() {
	for len(w.segs) > 0 && !w.failed {
		w.out = w.take()
		w.mu.Unlock()
		if w.raw == nil || w.raw.Write(w.writeFn) != nil {
			w.err = unix.EBADF // closed meanwhile
		}
		w.mu.Lock()
		out := w.out
		w.out = nil
		switch {
		case w.err == unix.EAGAIN:
			// The pipe is full: the rest, then what came meanwhile, goes
			// to the writer goroutine, which waits for the child to read.
			w.segs = append(unwritten(out, w.n), w.segs...)
			w.owner = ownerWriter
			w.kickWriter()
			return
		case w.err != nil:
			w.fail()
		default:
			w.keep(out)
		}
	}
	if w.stopping {
		w.owner = ownerWriter // the writer goroutine closes stdin
		w.kickWriter()
		return
	}
	w.owner = ownerNone
	w.idle.Broadcast()
}

// unwritten returns what is left of segs once n bytes of them are written.
func unwritten(segs [][]byte, n int) [][]byte {
	for len(segs) > 0 && n >= len(segs[0]) {
		n -= len(segs[0])
		segs = segs[1:]
	}
	if len(segs) > 0 {
		segs[0] = segs[0][n:]
	}
	return segs
}

// keep keeps written segments for the next ones (up to maxFree), except
// those a large message made large: a connection does not hold on to its
// largest request.
func (w *stdin) keep(written [][]byte) {
	for _, seg := range written {
		if len(w.free) < maxFree && cap(seg) <= segmentSize {
			w.free = append(w.free, seg[:0])
		}
	}
	if w.lists == nil && cap(written) <= 64 {
		clear(written)
		w.lists = written[:0]
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
	w.segs, w.free, w.lists, w.queued = nil, nil, nil, 0
	w.signalRoom()
}

func (w *stdin) signalRoom() {
	if !w.roomWanted {
		return
	}
	w.roomWanted = false
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
	for len(w.segs) > 0 && !w.failed {
		out := w.take()
		w.mu.Unlock()
		var err error
		for _, seg := range out {
			if _, err = w.f.Write(seg); err != nil { // waits for the child to read
				break
			}
		}
		w.mu.Lock()
		if err != nil {
			c.log.Debug("write to child failed", "err", err)
			w.fail()
			break
		}
		w.keep(out)
	}
	if w.stopping || w.failed {
		return true
	}
	w.owner = ownerNone
	w.idle.Broadcast()
	return false
}

// pause refuses new messages (ErrGone) and waits until what was queued is
// written, for a handover of the pipe to the next mcpgated; it fails after
// timeout, when the child does not read, and then takes messages again.
func (w *stdin) pause(timeout time.Duration) error {
	w.mu.Lock()
	w.paused = true
	gaveUp := false
	timer := time.AfterFunc(timeout, func() {
		w.mu.Lock()
		gaveUp = true
		w.idle.Broadcast()
		w.mu.Unlock()
	})
	defer timer.Stop()
	for (w.owner != ownerNone || len(w.segs) > 0) && !w.failed && !gaveUp {
		w.idle.Wait()
	}
	defer w.mu.Unlock()
	switch {
	case w.failed:
		return ErrGone
	case gaveUp:
		w.paused = false
		return fmt.Errorf("the server did not read its input within %s", timeout)
	}
	return nil
}

// stopWaiting ends a write that waits for a child that has exited: a
// process that left its group may still hold the pipe open without
// reading.
func (w *stdin) stopWaiting() {
	w.f.SetWriteDeadline(time.Unix(1, 0))
}
