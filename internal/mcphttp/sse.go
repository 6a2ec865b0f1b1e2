package mcphttp

import (
	"bufio"
	"bytes"
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
type EventReader struct {
	sc *bufio.Scanner
	// LastID is the last event id seen, for Last-Event-ID.
	LastID string
	// Retry is the reconnection delay the server asked for, 0 if none.
	Retry time.Duration
}

// NewEventReader returns a reader of the event stream r whose events hold
// at most max bytes.
func NewEventReader(r io.Reader, max int) *EventReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), max+4096)
	sc.Split(scanLines)
	return &EventReader{sc: sc}
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

func (s *EventReader) line() ([]byte, error) {
	if s.sc.Scan() {
		return s.sc.Bytes(), nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// Next returns the next event that had at least one field, including
// priming events that only set an id. At the end of the stream it returns
// io.EOF, or the read error; an unfinished last event is discarded.
func (s *EventReader) Next() (Event, error) {
	var ev Event
	seen, hasData := false, false
	for {
		line, err := s.line()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if seen {
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
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data = append(ev.Data, value...)
			hasData = true
		case "event":
			ev.Type = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID = string(value)
				s.LastID = ev.ID
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
				ev.Retry = time.Duration(ms) * time.Millisecond
				s.Retry = ev.Retry
			}
		}
	}
}

// Message returns the data of the next event of type "message" (the
// default) that carries data. Events with empty data, such as the priming
// events that only set an id, are skipped.
func (s *EventReader) Message() ([]byte, error) {
	for {
		ev, err := s.Next()
		if err != nil {
			return nil, err
		}
		if (ev.Type == "" || ev.Type == "message") && len(bytes.TrimSpace(ev.Data)) > 0 {
			return ev.Data, nil
		}
	}
}
