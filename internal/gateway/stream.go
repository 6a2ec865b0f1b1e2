package gateway

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Event is one message on a stream. Seq numbers start at 1 per stream.
type Event struct {
	Seq   int64
	Data  []byte
	Final bool // the response that ends a request's stream
}

// Stream is the ordered queue of messages for one client-facing stream: the
// answer to one POSTed request (its progress, log messages and requests
// from the backend, then the response) or a session's standalone stream.
// Messages are kept so that a client that lost its connection can resume
// after the last event it saw: at most the newest maxEvents of them, plus
// the responses, which are never dropped. Events up to the one a client
// resumed after are released, as it has them.
type Stream struct {
	// Key identifies the stream within its session; event ids are built from it.
	Key        int64
	standalone bool
	// jsonOnly marks the answer to a client that accepts no event stream:
	// only responses can go on it; other messages take the standalone stream.
	jsonOnly bool
	// internal marks the answer to a request the gateway sends itself (a
	// composite's step): no client reads it, and nothing of the client's
	// own request (its headers, its requestState) belongs to it.
	internal bool
	finished bool // no more events will come; guarded by mu

	finalsLeft int // responses still to come before the stream ends
	// modern, if set, decorates the response to a stateless request of
	// method (see modernResult); errCode is the code of the error it
	// carried, 0 for a result. Both are guarded by mu.
	modern   *modernResult
	method   string
	errCode  int
	takeover func() // stops the connection currently writing a standalone stream

	mu        sync.Mutex
	events    []Event // the retained window, consecutive seqs, oldest first
	finals    []Event // responses older than the window, kept for resumption
	maxEvents int     // bound of the window
	next      int64   // seq of the next event
	acked     int64   // events up to this seq were written to some connection
	wake      chan struct{}
	attached  int         // connections currently writing this stream
	orphan    *time.Timer // runs abandon and forget when no connection comes back
	abandon   []func()    // cancel the requests of an abandoned stream
	// firstCall is the first call whose request the stream answers,
	// cancelled with the hooks in abandon: the common stream of one
	// request registers no hook of its own (see onAbandonCall).
	firstCall *call
	// divert, if set, takes what is pushed after the stream's answer, and
	// a drop (nil, true): see divertAfter.
	divert func(data []byte, final bool)
	// owner is the session of a request's stream, which forgets the
	// stream once no client can resume it any more; nil for other streams.
	owner *Session
	// ops are the server ops of the stream's requests, each ended by its
	// answer (see telemetry.go); nil without telemetry.
	ops *streamOps
}

// DefaultMaxStreamEvents is how many events a stream keeps for resumption
// when Options.MaxStreamEvents is not set.
const DefaultMaxStreamEvents = 512

func newStream(key int64, standalone bool, maxEvents int) *Stream {
	if maxEvents <= 0 {
		maxEvents = DefaultMaxStreamEvents
	}
	return &Stream{Key: key, standalone: standalone, next: 1, finalsLeft: 1, maxEvents: maxEvents, wake: make(chan struct{})}
}

// requestStream is a request's stream with room for its first event: the
// one response of most requests is pushed without an allocation. A
// session's standalone stream, which lives as long as the session, does
// without it.
type requestStream struct {
	Stream
	inline [1]Event
}

// newRequestStream is newStream of a request's stream.
func newRequestStream(key int64, maxEvents int) *Stream {
	if maxEvents <= 0 {
		maxEvents = DefaultMaxStreamEvents
	}
	rs := &requestStream{Stream: Stream{Key: key, next: 1, finalsLeft: 1, maxEvents: maxEvents, wake: make(chan struct{})}}
	rs.events = rs.inline[:0]
	return &rs.Stream
}

// push appends a message. It reports false when the stream has ended or
// cannot carry a message that is not a response. Line breaks (JSON
// whitespace, as a backend may write it) are blanked: each message is one
// line of an event stream.
func (s *Stream) push(data []byte, final bool) bool {
	data = jsonrpc.OneLine(data)
	s.mu.Lock()
	if d := s.divert; d != nil {
		s.mu.Unlock()
		d(data, final)
		return true
	}
	defer s.mu.Unlock()
	return s.pushLocked(data, final)
}

// pushLocked is push under s.mu.
func (s *Stream) pushLocked(data []byte, final bool) bool {
	if s.finished || (s.jsonOnly && !final) {
		return false
	}
	if final && s.modern != nil {
		data, s.errCode = s.modern.decorate(s.method, data)
	}
	if final && s.ops != nil {
		s.endOpLocked(data)
	}
	s.events = append(s.events, Event{Seq: s.next, Data: data, Final: final})
	s.next++
	if len(s.events) > s.maxEvents {
		if e := s.events[0]; e.Final {
			s.finals = append(s.finals, e)
		}
		s.events[0] = Event{} // release its data now
		s.events = s.events[1:]
	}
	if final {
		s.finalsLeft--
		s.finished = s.finalsLeft <= 0
	}
	s.signal()
	return true
}

// drop ends one request of the stream without a response, as for a
// cancelled request; the stream ends when no request is left. The other
// requests of a batch keep their answers.
func (s *Stream) drop() {
	s.mu.Lock()
	if d := s.divert; d != nil {
		s.mu.Unlock()
		d(nil, true)
		return
	}
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	if s.ops != nil {
		s.dropOpLocked()
	}
	s.finalsLeft--
	if s.finalsLeft <= 0 {
		s.finished = true
		if s.ops != nil {
			s.endOpsLocked()
		}
		s.signal()
	}
}

// finish ends the stream without another message, e.g. for a closed
// session.
func (s *Stream) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.finished {
		s.finished = true
		if s.ops != nil {
			s.endOpsLocked()
		}
		s.signal()
	}
}

func (s *Stream) signal() {
	close(s.wake)
	if !s.finished { // a finished stream is never waited on: Wait returns at once
		s.wake = make(chan struct{})
	}
}

// Wait returns the events after seq after, blocking until there is one, the
// stream has ended, or ctx ends. done is true when the stream has ended and
// the returned events are its last.
func (s *Stream) Wait(ctx context.Context, after int64) (events []Event, done bool, err error) {
	return s.WaitAppend(ctx, after, nil)
}

// WaitAppend is Wait appending the events to events: a caller with room
// for them allocates nothing.
func (s *Stream) WaitAppend(ctx context.Context, after int64, events []Event) ([]Event, bool, error) {
	for {
		s.mu.Lock()
		for _, e := range s.finals {
			if e.Seq > after {
				events = append(events, e)
			}
		}
		// The window holds consecutive seqs: no search, whatever its length.
		if i := after + 1 - s.first(); i < int64(len(s.events)) {
			events = append(events, s.events[max(i, 0):]...)
		}
		done, wake := s.finished, s.wake
		s.mu.Unlock()
		if len(events) > 0 || done {
			return events, done, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// first returns the seq of the oldest event in the window.
func (s *Stream) first() int64 { return s.next - int64(len(s.events)) }

// release drops the events up to seq, which a client confirmed it has by
// resuming after them.
func (s *Stream) release(seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finals = slices.DeleteFunc(s.finals, func(e Event) bool { return e.Seq <= seq })
	n := min(seq+1-s.first(), int64(len(s.events)))
	if n <= 0 {
		return
	}
	clear(s.events[:n])
	s.events = s.events[n:]
}

// retained returns how many events the stream holds.
func (s *Stream) retained() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events) + len(s.finals)
}

// Takeover registers stop as the way to end the connection now writing a
// standalone stream, and ends the previous one: a client has one
// standalone stream at a time, the newest.
func (s *Stream) Takeover(stop func()) {
	s.mu.Lock()
	prev := s.takeover
	s.takeover = stop
	s.mu.Unlock()
	if prev != nil {
		prev()
	}
}

// Ack records that events up to seq were written to a connection. A new
// connection to a standalone stream without a Last-Event-ID starts there.
func (s *Stream) Ack(seq int64) {
	s.mu.Lock()
	s.acked = max(s.acked, seq)
	s.mu.Unlock()
}

// Acked returns the seq of the last event written to any connection.
func (s *Stream) Acked() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// Attach records a connection that writes this stream; it stops the orphan
// timer of a stream whose client comes back.
func (s *Stream) Attach() {
	s.mu.Lock()
	s.attached++
	if s.orphan != nil {
		s.orphan.Stop()
		s.orphan = nil
	}
	s.mu.Unlock()
}

// Detach records that a connection stopped writing this stream. Unless a
// client resumes a request's stream within grace (0: at once), its
// requests still in flight are cancelled and the stream is forgotten. A
// stream that has ended stays resumable for grace too: the client may not
// have received its last events.
func (s *Stream) Detach(grace time.Duration) {
	s.mu.Lock()
	s.attached--
	if s.attached > 0 || s.standalone || s.orphan != nil || (s.finished && s.owner == nil) {
		s.mu.Unlock()
		return
	}
	if s.finished && grace == 0 {
		// The common case of a plain JSON answer: no timer on the hot path.
		owner := s.owner
		s.mu.Unlock() // StreamDone takes the session's lock
		owner.StreamDone(s)
		return
	}
	defer s.mu.Unlock()
	var timer *time.Timer
	timer = time.AfterFunc(grace, func() {
		s.mu.Lock()
		if s.orphan != timer || s.attached > 0 {
			s.mu.Unlock()
			return // a client came back
		}
		s.orphan = nil
		abandoned := !s.finished
		hooks, first, owner := s.abandon, s.firstCall, s.owner
		s.mu.Unlock()
		if abandoned {
			if first != nil {
				first.abandoned()
			}
			for _, fn := range hooks {
				fn()
			}
		}
		if owner != nil {
			owner.StreamDone(s)
		}
	})
	s.orphan = timer
}

// onAbandon registers fn to run when the stream is abandoned (see Detach).
func (s *Stream) onAbandon(fn func()) {
	s.mu.Lock()
	s.abandon = append(s.abandon, fn)
	s.mu.Unlock()
}

// onAbandonCall registers c to be cancelled when the stream is abandoned,
// as onAbandon(c.abandoned) would, without a hook of its own for the
// stream's first call.
func (s *Stream) onAbandonCall(c *call) {
	s.mu.Lock()
	if s.firstCall == nil {
		s.firstCall = c
		s.mu.Unlock()
		return
	}
	s.abandon = append(s.abandon, c.abandoned)
	s.mu.Unlock()
}

// ErrorCode returns the JSON-RPC error code of the response to a
// stateless request, once pushed: 0 for a result. The transport chooses
// its HTTP status by it.
func (s *Stream) ErrorCode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errCode
}

// PushResponse puts a response the transport made itself, such as the error
// for an invalid member of a batch, on a request's stream.
func PushResponse(st *Stream, resp []byte) { st.push(resp, true) }
