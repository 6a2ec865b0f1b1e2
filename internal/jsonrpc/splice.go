package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
)

// errSyntax reports JSON the scanner cannot walk. Callers have normally
// validated the document already (Parse does), so this is rare.
var errSyntax = errors.New("jsonrpc: malformed JSON")

// Span locates a member value inside a JSON object: obj[Start:End].
type Span struct{ Start, End int }

// Lookup finds the value of the top-level member key in the JSON object obj
// without decoding anything else. ok is false when obj is not an object or
// has no such member.
func Lookup(obj []byte, key string) (value json.RawMessage, span Span, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, Span{}, false
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return nil, Span{}, false
		}
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		keyEnd, err := skipString(obj, i)
		if err != nil {
			return nil, Span{}, false
		}
		match := keyEquals(obj[i:keyEnd], key)
		i = skipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return nil, Span{}, false
		}
		i = skipSpace(obj, i+1)
		end, err := skipValue(obj, i)
		if err != nil {
			return nil, Span{}, false
		}
		if match {
			return json.RawMessage(obj[i:end]), Span{i, end}, true
		}
		i = end
	}
}

// LookupPath follows nested members, e.g. LookupPath(params, "_meta", "progressToken").
// The span is relative to obj.
func LookupPath(obj []byte, keys ...string) (value json.RawMessage, span Span, ok bool) {
	base := 0
	value = obj
	for _, k := range keys {
		var s Span
		value, s, ok = Lookup(value, k)
		if !ok {
			return nil, Span{}, false
		}
		span = Span{base + s.Start, base + s.End}
		base += s.Start
	}
	return value, span, true
}

// Replace returns a copy of doc with doc[span] replaced by value.
func Replace(doc []byte, span Span, value []byte) []byte {
	out := make([]byte, 0, len(doc)-(span.End-span.Start)+len(value))
	out = append(out, doc[:span.Start]...)
	out = append(out, value...)
	return append(out, doc[span.End:]...)
}

// StringValue decodes a raw JSON string. ok is false for anything else.
func StringValue(raw json.RawMessage) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if plainASCII(raw[1 : len(raw)-1]) {
		return string(raw[1 : len(raw)-1]), true
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// Compact removes insignificant whitespace when raw contains a line break,
// which newline-delimited framing cannot carry. Otherwise raw is returned as is.
func Compact(raw json.RawMessage) json.RawMessage {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// OneLine returns msg with every CR and LF byte replaced by a space. In a
// valid JSON text they can only be insignificant whitespace (inside a
// string they must be escaped), so the message means the same and fits one
// line of a line-based framing such as server-sent events. msg is returned
// as is, not copied, when it has no line break.
func OneLine(msg []byte) []byte {
	if bytes.IndexByte(msg, '\n') < 0 && bytes.IndexByte(msg, '\r') < 0 {
		return msg
	}
	out := bytes.Clone(msg)
	for i, c := range out {
		if c == '\n' || c == '\r' {
			out[i] = ' '
		}
	}
	return out
}

// plainASCII reports whether a string's contents need no decoding: no
// escapes, and nothing encoding/json would replace as invalid UTF-8.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

func keyEquals(quoted []byte, key string) bool {
	inner := quoted[1 : len(quoted)-1]
	if plainASCII(inner) {
		return string(inner) == key
	}
	s, ok := StringValue(quoted)
	return ok && s == key
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errSyntax
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errSyntax
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errSyntax
	default:
		start := i
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if i == start {
					return 0, errSyntax
				}
				return i, nil
			}
			i++
		}
		if i == start {
			return 0, errSyntax
		}
		return i, nil
	}
}
