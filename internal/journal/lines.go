package journal

import (
	"bytes"
	"errors"
	"io"
	"unicode/utf8"
)

// MaxLineBytes is the longest line ReadLines delivers in one piece.
const MaxLineBytes = 64 << 10

// ReadLines reads r to its end and calls fn for every line, without its
// "\n" or "\r\n". A line longer than MaxLineBytes comes in pieces of at most
// MaxLineBytes (cut before a UTF-8 sequence, never inside one) with
// partial=true, its last piece with partial=false: exactly what
// BackendLog.Line expects. A last line without a newline is delivered at
// EOF. The slice passed to fn is valid only during the call. ReadLines
// returns nil at EOF, otherwise the read error.
func ReadLines(r io.Reader, fn func(line []byte, partial bool)) error {
	buf := make([]byte, MaxLineBytes+1)
	start, end := 0, 0
	var readErr error
	for {
		for {
			i := bytes.IndexByte(buf[start:end], '\n')
			if i < 0 {
				break
			}
			line := buf[start : start+i]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			fn(line, false)
			start += i + 1
		}
		if end-start > MaxLineBytes { // buffer full, no newline: cut a piece
			piece := buf[start : start+cutPoint(buf[start:start+MaxLineBytes])]
			fn(piece, true)
			start += len(piece)
			continue
		}
		if readErr != nil {
			if end > start {
				fn(buf[start:end], false)
			}
			if errors.Is(readErr, io.EOF) {
				return nil
			}
			return readErr
		}
		if start > 0 {
			end = copy(buf, buf[start:end])
			start = 0
		}
		var n int
		n, readErr = r.Read(buf[end:])
		end += n
	}
}

// cutPoint returns len(b), or less so that b[:cut] does not end inside a
// UTF-8 sequence.
func cutPoint(b []byte) int {
	for k := 1; k <= utf8.UTFMax && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < utf8.RuneSelf {
			return len(b) // ASCII: a clean boundary
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-k:]) {
				return len(b)
			}
			if k == len(b) {
				return len(b)
			}
			return len(b) - k
		}
	}
	return len(b) // not UTF-8 anyway
}
