package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"unicode"
	"unicode/utf8"
)

// errSyntax reports JSON the scanner cannot walk. Callers have normally
// validated the document already (Parse does), so this is rare.
var errSyntax = errors.New("jsonrpc: malformed JSON")

// Span locates a member value inside a JSON object: obj[Start:End].
type Span struct{ Start, End int }

// Lookup finds the value of the top-level member key in the JSON object obj
// without decoding anything else. ok is false when obj is not an object,
// has no such member, or has a member that JSON parsers read differently
// (see Find): a caller never acts on a value the peer may not see.
func Lookup(obj []byte, key string) (value json.RawMessage, span Span, ok bool) {
	value, span, err := Find(obj, key)
	return value, span, err == nil && value != nil
}

// LookupPath follows nested members, e.g. LookupPath(params, "_meta", "progressToken").
// The span is relative to obj.
func LookupPath(obj []byte, keys ...string) (value json.RawMessage, span Span, ok bool) {
	value, span, err := FindPath(obj, keys...)
	return value, span, err == nil && value != nil
}

// Find is Lookup that tells a missing member from an ambiguous one. It
// returns the value and its span when obj has exactly one member named key;
// a nil value and a nil error when obj is not an object or has no member
// any JSON parser would read as key; and an *AmbiguousError when it has
// more than one (parsers take the first or, most of them, the last), or
// one whose name differs from key only in case (Go's encoding/json reads
// it as key, other parsers do not). Malformed JSON gives an error.
func Find(obj []byte, key string) (value json.RawMessage, span Span, err error) {
	var values [1]json.RawMessage
	var spans [1]Span
	if err := findEach(obj, []string{key}, values[:], spans[:]); err != nil {
		return nil, Span{}, err
	}
	return values[0], spans[0], nil
}

// FindEach is Find for several members in one pass over obj: values[i] is
// the value of keys[i], nil if obj has no such member. It returns the
// first *AmbiguousError of any of them, or an error for malformed JSON.
func FindEach(obj []byte, keys []string, values []json.RawMessage) error {
	return findEach(obj, keys, values, nil)
}

// FindEachSpan is FindEach that also sets spans[i] to where values[i] is
// in obj.
func FindEachSpan(obj []byte, keys []string, values []json.RawMessage, spans []Span) error {
	return findEach(obj, keys, values, spans)
}

func findEach(obj []byte, keys []string, values []json.RawMessage, spans []Span) error {
	clear(values)
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return errSyntax
		}
		if obj[i] == '}' {
			return nil
		}
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		keyStart := i
		keyEnd, err := skipString(obj, i)
		if err != nil {
			return err
		}
		i = skipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return errSyntax
		}
		i = skipSpace(obj, i+1)
		end, err := skipValue(obj, i)
		if err != nil {
			return err
		}
		quoted := obj[keyStart:keyEnd]
		plain := plainASCII(quoted[1 : len(quoted)-1]) // once, not once per key
		for k, key := range keys {
			if plain && len(quoted)-2 != len(key) {
				continue // what matchKey would say first, without the call
			}
			switch matchKey(quoted, plain, key) {
			case matchFolded:
				name, _ := StringValue(json.RawMessage(obj[keyStart:keyEnd]))
				return &AmbiguousError{Key: key, Name: name}
			case matchExact:
				if values[k] != nil {
					return &AmbiguousError{Key: key, Name: key}
				}
				values[k] = json.RawMessage(obj[i:end])
				if spans != nil {
					spans[k] = Span{i, end}
				}
			}
		}
		i = end
	}
}

// FindPath is LookupPath that tells a missing member from an ambiguous
// one, as Find does, at every step of the path.
func FindPath(obj []byte, keys ...string) (value json.RawMessage, span Span, err error) {
	base := 0
	value = obj
	for _, k := range keys {
		var s Span
		value, s, err = Find(value, k)
		if err != nil || value == nil {
			return nil, Span{}, err
		}
		span = Span{base + s.Start, base + s.End}
		base += s.Start
	}
	return value, span, nil
}

// AmbiguousError reports an object in which JSON parsers disagree on the
// value of the member Key: it is repeated (Name is Key), or a member Name
// differs from it only in case.
type AmbiguousError struct{ Key, Name string }

func (e *AmbiguousError) Error() string {
	if e.Name == e.Key {
		return fmt.Sprintf("member %q appears more than once", e.Key)
	}
	return fmt.Sprintf("member %q differs from %q only in case", e.Name, e.Key)
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
	// Eight bytes at a time: every scan of an object checks each member
	// name once, and the _meta names of 2026-07-28 are 40 bytes long.
	const ones, highs, backslashes = 0x0101010101010101, 0x8080808080808080, 0x5c5c5c5c5c5c5c5c
	for ; len(b) >= 8; b = b[8:] {
		// No byte of w is 0x80 or above, nor a backslash (a zero byte
		// of w ^ backslashes, which (x-ones)&^x&highs finds).
		w := binary.LittleEndian.Uint64(b)
		if x := w ^ backslashes; (w|(x-ones)&^x)&highs != 0 {
			return false
		}
	}
	for _, c := range b {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

const (
	matchNone = iota
	matchExact
	matchFolded
)

// matchKey reports how a quoted member name matches key: exactly once
// decoded, or only as encoding/json matches names, with Unicode case
// folding. plain is plainASCII of the name between the quotes.
func matchKey(quoted []byte, plain bool, key string) int {
	name := quoted[1 : len(quoted)-1]
	if plain {
		switch {
		case len(name) != len(key):
			return matchNone // ASCII folding keeps the length
		case string(name) == key:
			return matchExact
		case foldEqualASCII(name, key):
			return matchFolded
		}
		return matchNone
	}
	s, ok := StringValue(quoted)
	switch {
	case !ok:
		return matchNone
	case s == key:
		return matchExact
	case foldEqual(s, key):
		return matchFolded
	}
	return matchNone
}

// foldEqualASCII is foldEqual for names of ASCII letters.
func foldEqualASCII(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// foldEqual reports whether encoding/json takes a and b for the same member
// name: equal once each rune is mapped to unicode.ToUpper(unicode.ToLower(r)).
func foldEqual(a, b string) bool {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb && unicode.ToUpper(unicode.ToLower(ra)) != unicode.ToUpper(unicode.ToLower(rb)) {
			return false
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) == 0 && len(b) == 0
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
	i++
	// The first words one at a time, for the quote and the backslash at
	// once: most strings (member names, short values) end within them,
	// where two IndexByte calls would cost more than the bytes.
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	const quotes, backslashes = 0x2222222222222222, 0x5c5c5c5c5c5c5c5c
	for words := 0; words < 6 && i+8 <= len(b); words++ {
		w := binary.LittleEndian.Uint64(b[i:])
		q, e := w^quotes, w^backslashes
		// The lowest high bit set marks the first quote or backslash
		// (the bits above it may be false).
		found := ((q-ones)&^q | (e-ones)&^e) & highs
		if found == 0 {
			i += 8
			continue
		}
		j := i + bits.TrailingZeros64(found)/8
		if b[j] == '"' {
			return j + 1, nil
		}
		i = j + 2 // the backslash and the byte it escapes
	}
	if i > len(b) {
		return 0, errSyntax // a backslash was the last byte
	}
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0, errSyntax
		}
		q += i
		// Each backslash before it escapes the byte after it, which may be
		// this quote: then the string goes on to a later one.
		for {
			k := bytes.IndexByte(b[i:q], '\\')
			if k < 0 {
				return q + 1, nil
			}
			if i += k + 2; i > q {
				break
			}
		}
	}
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
