package jsonrpc

import "encoding/json"

// SpliceRoom is the room a reader leaves before each line (see
// LineReader.NextRoom) so that a response can take a client's id up to
// that many bytes longer than its own in place.
const SpliceRoom = 64

// ParseRoom is Parse for a message read with NextRoom: the message is
// buf[room:], and the room in front lets SpliceResult rewrite it in place.
func ParseRoom(buf []byte, room int) (*Message, error) {
	m, err := Parse(buf[room:])
	if err != nil {
		return nil, err
	}
	m.buf, m.room = buf, room
	return m, nil
}

// SpliceResult returns the response m with its id replaced by id, written
// over the buffer m was parsed from instead of copied: a large result is
// never held twice. It reports false, and leaves m alone, when it cannot:
// m was not parsed by ParseRoom, is not a response with a result, result
// is not m's own Result (something rewrote it), a member of the envelope
// is spelled in another case or unknown (a copy drops it), or id is too
// much longer than m's id for the room. After a true return m must not be
// used: its fields point into bytes that were moved.
func SpliceResult(m *Message, result, id json.RawMessage) ([]byte, bool) {
	if m.buf == nil || m.inexact || m.Error != nil || len(m.Result) == 0 || len(m.ID) == 0 ||
		len(result) != len(m.Result) || &result[0] != &m.Result[0] {
		return nil, false
	}
	line := m.buf[m.room:]
	at := cap(line) - cap(m.ID) // where the id starts in line
	if at < 0 || at >= len(line) || &line[at] != &m.ID[0] {
		return nil, false
	}
	start := m.room - (len(id) - len(m.ID))
	if start < 0 || start > m.room+at {
		return nil, false
	}
	copy(m.buf[start:], line[:at]) // the bytes before the id, moved by the difference
	copy(m.buf[start+at:], id)
	return m.buf[start:], true
}
