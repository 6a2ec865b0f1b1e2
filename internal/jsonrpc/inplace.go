package jsonrpc

import "encoding/json"

// SpliceRoom is the room a reader leaves before each line (see
// LineReader.NextRoom) so that a response can take, in place, a client's
// id longer than its own and the members a 2026-07-28 client's result
// gets (see SpliceResultInsert): together up to that many bytes.
const SpliceRoom = 256

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

// SpliceResultInsert is SpliceResult that also inserts insert into the
// result at offset at (0 < at <= len(result)), in the same move over the
// buffer: a member added to a large result costs no copy of it. The room
// must hold the longer id and insert; it reports false, leaving m alone,
// when SpliceResult would, or when the room does not suffice.
func SpliceResultInsert(m *Message, result, id json.RawMessage, at int, insert []byte) ([]byte, bool) {
	if m.buf == nil || m.inexact || m.Error != nil || len(m.Result) == 0 || len(m.ID) == 0 ||
		len(result) != len(m.Result) || &result[0] != &m.Result[0] || at <= 0 || at > len(result) {
		return nil, false
	}
	line := m.buf[m.room:]
	idAt := cap(line) - cap(m.ID)      // where the id starts in line
	resAt := cap(line) - cap(m.Result) // where the result starts in line
	if idAt < 0 || resAt <= idAt || resAt >= len(line) || &line[idAt] != &m.ID[0] || &line[resAt] != &m.Result[0] {
		return nil, false
	}
	start := m.room - (len(id) - len(m.ID)) - len(insert)
	if start < 0 {
		return nil, false
	}
	// Front to back: each piece moves to where the one before it ends,
	// which never overwrites what is still to be moved.
	out := m.buf[start:]
	n := copy(out, line[:idAt])
	n += copy(out[n:], id)
	n += copy(out[n:], line[idAt+len(m.ID):resAt+at])
	copy(out[n:], insert)
	return out, true
}
