package mcphttp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Event is one server-sent event.
type Event struct {
	ID    string // the id field, "" when the event had none
	Type  string // the event field, "" for the default type "message"
	Data  []byte // the data lines joined with LF
	Retry time.Duration
}

// EventReader reads a text/event-stream as the HTML specification defines
// it: lines end with CRLF, LF or CR; data lines of one event are joined
// with LF; comments and fields other than data, event, id and retry are
// ignored.
//
// It holds at most one event's data (max bytes) and a chunk of one line
// at a time, however long the server makes an event or a line: a server
// cannot make it grow beyond that. A line longer than a chunk is read in
// parts.
type EventReader struct {
	sc    *bufio.Scanner
	max   int
	chunk int // the most of a line held at a time: chunkBytes
	// partial is set by the split function when the token it returns
	// is a part of a line, and the next token continues it.
	partial, more bool
	// skipping is set after an event too large: what is left of it is
	// read and dropped before the next event.
	skipping bool
	// LastID is the last event id seen, for Last-Event-ID.
	LastID string
	// Retry is the reconnection delay the server asked for, 0 if none.
	Retry time.Duration

	// room is the spare bytes left before each event's data, and buf the
	// last event's data with them (see MessageRoom). sized, when set,
	// says how much of the stream may still come, for an event that
	// grows large to be held in one buffer of that size.
	room  int
	buf   []byte
	sized func() int
}

// chunkBytes is the most of one line the reader holds at a time.
const chunkBytes = 64 << 10

// headBytes is how much of an event too large EventTooLargeError keeps,
// to learn which request it answered (jsonrpc.ParseHead).
const headBytes = 1024

// NewEventReader returns a reader of the event stream r whose events hold
// at most max bytes of data.
func NewEventReader(r io.Reader, max int) *EventReader {
	return newEventReader(r, max, chunkBytes)
}

// NewEventReaderRoom is NewEventReader whose events' data have room
// spare bytes before them (see MessageRoom). sized, if not nil, returns
// at most how many bytes the stream still holds (from its
// Content-Length): an event larger than 64 KiB is then held in one
// buffer of that size rather than grown by doubling.
func NewEventReaderRoom(r io.Reader, max, room int, sized func() int) *EventReader {
	s := newEventReader(r, max, chunkBytes)
	s.room, s.sized = room, sized
	return s
}

// newEventReader is NewEventReader with lines read in chunks of chunk
// bytes (at least 8, so that the first holds a field name, its colon
// and the space after it).
func newEventReader(r io.Reader, max, chunk int) *EventReader {
	s := &EventReader{max: max, chunk: chunk}
	s.sc = bufio.NewScanner(r)
	s.sc.Buffer(make([]byte, 0, min(4096, chunk)), chunk)
	s.sc.Split(s.split)
	return s
}

// EventTooLargeError is the error of an event whose data exceeds the
// reader's bound. The reader drops the rest of that event, and Next reads
// the one after it.
type EventTooLargeError struct {
	Max  int    // the bound, in bytes
	Head []byte // the first bytes of the event's data
}

func (e *EventTooLargeError) Error() string {
	return fmt.Sprintf("a message of more than %d bytes, the limit on one message", e.Max)
}

// split is scanLines, except that a line longer than a chunk comes in
// parts: the scanner would otherwise fail, or have to hold it whole.
func (s *EventReader) split(data []byte, atEOF bool) (advance int, token []byte, err error) {
	advance, token, err = scanLines(data, atEOF)
	s.partial = false
	if advance == 0 && token == nil && err == nil && len(data) >= s.chunk {
		n := len(data)
		if data[n-1] == '\r' {
			n-- // an LF may follow: the line ends there
		}
		s.partial = true
		return n, data[:n], nil
	}
	return advance, token, err
}

// scanLines splits an event stream into lines ended by CRLF, LF or CR. A
// final line without an ending is returned too; Next discards its
// unfinished event.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF && len(data) > 0:
		return len(data), data, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	default:
		return 0, nil, nil // a CR at the end: an LF may follow
	}
}

// line returns the next line, or the next part of one; cont says that it
// continues the line before.
func (s *EventReader) line() (line []byte, cont bool, err error) {
	cont = s.more
	if s.sc.Scan() {
		s.more = s.partial
		return s.sc.Bytes(), cont, nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, false, err
	}
	return nil, false, io.EOF
}

// sizedAbove is the size of an event's data past which the reader grows
// its buffer to what the stream may still hold (see sized) in one step,
// instead of doubling it: a large event is then held once, not as its
// last buffer beside the one it outgrew.
const sizedAbove = 64 << 10

// appendData appends value to data, which holds the room and the
// event's data so far.
func (s *EventReader) appendData(data, value []byte) []byte {
	if data == nil {
		data = make([]byte, s.room, s.room+len(value))
	}
	if need := len(data) + len(value); need > cap(data) && s.sized != nil && need-s.room > sizedAbove {
		// What is held, and what may still come up to the bound.
		if size := len(data) + min(s.max-(len(data)-s.room), s.sized()); size >= need {
			grown := make([]byte, len(data), size)
			copy(grown, data)
			data = grown
		}
	}
	return append(data, value...)
}

// Next returns the next event that had at least one field, including
// priming events that only set an id. At the end of the stream it returns
// io.EOF, or the read error; an unfinished last event is discarded. An
// event whose data exceeds the bound is an *EventTooLargeError, returned
// as soon as the bound is passed; the next call skips the rest of it.
func (s *EventReader) Next() (Event, error) {
	for s.skipping {
		line, cont, err := s.line()
		if err != nil {
			return Event{}, err
		}
		s.skipping = cont || len(line) > 0
	}
	var ev Event
	var data []byte // the room, then the event's data; nil before a data line
	defer func() { s.buf = data }()
	seen, hasData := false, false
	inData := false // the line being read is a data line
	for {
		line, cont, err := s.line()
		if err != nil {
			return Event{}, err
		}
		if cont {
			// The rest of a long line: only data keeps it; an id, event
			// type or retry that long is not one.
			if inData {
				if len(data)-s.room+len(line) > s.max {
					return Event{}, s.tooLarge(data[s.room:], line)
				}
				data = s.appendData(data, line)
			}
			continue
		}
		inData = false
		if len(line) == 0 {
			if seen {
				if hasData {
					ev.Data = data[s.room:]
				}
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		seen = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				if len(data)-s.room+1+len(value) > s.max {
					return Event{}, s.tooLarge(append(data[s.room:], '\n'), value)
				}
				data = append(data, '\n')
			} else if len(value) > s.max {
				return Event{}, s.tooLarge(nil, value)
			}
			data = s.appendData(data, value)
			hasData, inData = true, true
		case "event":
			if !s.more {
				ev.Type = string(value)
			}
		case "id":
			if !s.more && bytes.IndexByte(value, 0) < 0 {
				ev.ID = string(value)
				s.LastID = ev.ID
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil && !s.more {
				ev.Retry = time.Duration(ms) * time.Millisecond
				s.Retry = ev.Retry
			}
		}
	}
}

// tooLarge returns the error of the event being read, whose data so far
// is data followed by more, and skips the rest of it.
func (s *EventReader) tooLarge(data, more []byte) error {
	h := make([]byte, 0, headBytes)
	h = append(h, data[:min(len(data), headBytes)]...)
	h = append(h, more[:min(len(more), headBytes-len(h))]...)
	s.skipping = true
	return &EventTooLargeError{Max: s.max, Head: h}
}

// Message returns the data of the next event of type "message" (the
// default) that carries data. Events with empty data, such as the priming
// events that only set an id, are skipped.
func (s *EventReader) Message() ([]byte, error) {
	buf, room, err := s.MessageRoom()
	if err != nil {
		return nil, err
	}
	return buf[room:], nil
}

// MessageRoom is Message for a reader made by NewEventReaderRoom: the
// data is buf[room:], and the bytes before it are free for the caller to
// use (jsonrpc.ParseRoom).
func (s *EventReader) MessageRoom() (buf []byte, room int, err error) {
	for {
		ev, err := s.Next()
		if err != nil {
			return nil, 0, err
		}
		if (ev.Type == "" || ev.Type == "message") && len(bytes.TrimSpace(ev.Data)) > 0 {
			return s.buf, s.room, nil
		}
	}
}
