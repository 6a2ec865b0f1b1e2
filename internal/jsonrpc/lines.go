package jsonrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ErrLineTooLong is returned by LineReader.Next for a line over the limit.
// The rest of that line has been discarded; the next call reads the next line.
type ErrLineTooLong struct {
	Limit int64
	Head  []byte // the line's first bytes, enough to find its id
}

// headLen is how much of a discarded line ErrLineTooLong keeps.
const headLen = 256

func (e *ErrLineTooLong) Error() string {
	return fmt.Sprintf("message longer than max_message_bytes (%d bytes)", e.Limit)
}

// LineReader reads newline-delimited messages of bounded size.
type LineReader struct {
	r     *bufio.Reader
	limit int64
	// partial is the start of a line a read error interrupted (a deadline:
	// see Unread); nil otherwise.
	partial []byte
}

// NewLineReader returns a reader of lines no longer than limit bytes.
func NewLineReader(r io.Reader, limit int64) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

// Next returns the next non-empty line without its line ending, in a freshly
// allocated slice the caller owns. At the end of input it returns io.EOF; a
// final line without a newline is still returned first.
func (lr *LineReader) Next() ([]byte, error) {
	return lr.NextRoom(0)
}

// NextRoom is Next with room spare bytes before the line: it returns buf,
// whose line is buf[room:]. A message parsed from it with ParseRoom can be
// answered in place (see SpliceResult).
func (lr *LineReader) NextRoom(room int) (buf []byte, err error) {
	for {
		buf, err := lr.readLine(room)
		if len(buf) > room || err != nil {
			return buf, err
		}
	}
}

// LineBuffered reports whether a whole line is read already and waits in
// the buffer: if not, the next Next or NextRoom may block.
func (lr *LineReader) LineBuffered() bool {
	n := lr.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := lr.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// readLine reads a line into a slice of its exact size (plus room). A line
// longer than the buffer is kept outside the Go heap while it is read and
// then moved into that slice (see spill): growing one slice instead would
// leave garbage of several times the line's size behind, and keeping its
// pieces would hold it twice while they are joined, which a result of tens
// of megabytes turns into that many times its size of resident memory.
func (lr *LineReader) readLine(room int) ([]byte, error) {
	var long *spill // the line so far, if longer than the buffer
	var size int    // bytes of the line so far
	var head []byte // the first bytes of a line found too long
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if head == nil {
			if int64(size+len(chunk)) > lr.limit+2 {
				head = long.head(chunk)
				long.free()
				long = nil
			} else if errors.Is(err, bufio.ErrBufferFull) {
				if long == nil {
					long = &spill{}
				}
				long.append(chunk)
			}
		}
		size += len(chunk)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil || (errors.Is(err, io.EOF) && size > 0):
			// A final line without a newline counts too, also when it is
			// too long (then only head holds its start).
			if head != nil {
				return nil, &ErrLineTooLong{Limit: lr.limit, Head: head}
			}
			var buf []byte
			if long != nil {
				buf = long.moveTo(room, size)
			} else {
				buf = make([]byte, room, room+size)
			}
			buf = append(buf, chunk...)
			line := trimEOL(buf[room:])
			if int64(len(line)) > lr.limit {
				return nil, &ErrLineTooLong{Limit: lr.limit, Head: line[:min(len(line), headLen)]}
			}
			return buf[:room+len(line)], nil
		default:
			if size > 0 && head == nil && !errors.Is(err, io.EOF) {
				// Kept for Unread: a reader stopped by a deadline hands the
				// line's start on rather than losing it.
				var start []byte
				if long != nil {
					start = long.moveTo(0, size)
				}
				lr.partial = append(start, chunk...)
			} else {
				long.free()
			}
			return nil, err
		}
	}
}

// Unread returns what was read from the underlying reader and not yet
// returned: the start of a line an error interrupted, then what is
// buffered. It is for a reader that stops for good (after a read deadline)
// and hands the stream to someone else, who must read these bytes first.
func (lr *LineReader) Unread() []byte {
	n := lr.r.Buffered()
	b, _ := lr.r.Peek(n)
	return append(bytes.Clone(lr.partial), b...)
}

// joinHead returns the first headLen bytes of pieces followed by last.
func joinHead(pieces [][]byte, last []byte) []byte {
	var head []byte
	for _, p := range append(pieces, last) {
		head = append(head, p[:min(len(p), headLen-len(head))]...)
		if len(head) == headLen {
			break
		}
	}
	return head[:len(head):len(head)]
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// LeadingID finds the id of a message from its first bytes, for a message
// too large to parse whole. It recognises an integer id that comes before
// any params, result or error member, as messages are normally written.
func LeadingID(head []byte) (int64, bool) {
	i := 0
	for depth := 0; i < len(head); i++ {
		switch head[i] {
		case '{':
			depth++
		case '}':
			depth--
		case '"':
			end, err := skipString(head, i)
			if err != nil {
				return 0, false
			}
			if depth == 1 && string(head[i:end]) == `"id"` {
				j := skipSpace(head, end)
				if j < len(head) && head[j] == ':' {
					j = skipSpace(head, j+1)
					k := j
					for k < len(head) && (head[k] == '-' || head[k] >= '0' && head[k] <= '9') {
						k++
					}
					n, err := strconv.ParseInt(string(head[j:k]), 10, 64)
					if err != nil || k == len(head) {
						return 0, false // not a number, or it may go on
					}
					return n, true
				}
			}
			if depth == 1 && (string(head[i:end]) == `"params"` || string(head[i:end]) == `"result"` || string(head[i:end]) == `"error"`) {
				return 0, false
			}
			i = end - 1
		}
	}
	return 0, false
}

// Head is what the first bytes of a message too large to parse whole say
// about it.
type Head struct {
	// ID is the message's raw id, when it comes complete before any
	// params, result or error member; nil otherwise.
	ID json.RawMessage
	// Response is true when a result or error member comes before any
	// method or params member: only then may the message settle a call.
	Response bool
	// Request is true when a method or params member was found: the
	// message is a request (or a notification, when ID is nil).
	Request bool
}

// ParseHead reads the top-level members of a message's first bytes, up to
// the first member that may be long (params, result or error), as messages
// are normally written.
func ParseHead(head []byte) Head {
	var h Head
	i := skipSpace(head, 0)
	if i >= len(head) || head[i] != '{' {
		return Head{}
	}
	i++
	for {
		i = skipSpace(head, i)
		end, err := skipString(head, i)
		if err != nil {
			return h
		}
		key := string(head[i:end])
		i = skipSpace(head, end)
		if i >= len(head) || head[i] != ':' {
			return h
		}
		i = skipSpace(head, i+1)
		switch key {
		case `"params"`:
			h.Request = true
			return h
		case `"result"`, `"error"`:
			h.Response = !h.Request
			return h
		case `"method"`:
			h.Request = true
		}
		end, err = skipValue(head, i)
		if err != nil || end >= len(head) {
			return h // the value may go on
		}
		if key == `"id"` {
			h.ID = json.RawMessage(head[i:end])
		}
		i = skipSpace(head, end)
		if i >= len(head) || head[i] != ',' {
			return h
		}
		i++
	}
}
