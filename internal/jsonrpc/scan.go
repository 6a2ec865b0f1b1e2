package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// parseEnvelope reads a message in one pass: it validates the whole
// document as JSON and records where the top-level members are, without
// decoding params, result or error. It accepts exactly what json.Unmarshal
// into Message accepts, and a repeated member counts as its last value, as
// there.
func parseEnvelope(data []byte, m *Message) error {
	_, err := scanEnvelope(data, m)
	return err
}

// scanEnvelope is parseEnvelope that also reports the first field of the
// envelope set by more than one member ("" if none), for Parse to refuse.
func scanEnvelope(data []byte, m *Message) (repeated string, err error) {
	var seen [6]bool
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		// Let encoding/json word the error for anything that is not an
		// object; it is the rare path.
		return "", json.Unmarshal(data, m)
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			if i >= len(data) || data[i] != '"' {
				return "", syntaxError(data, i, "expected a member name")
			}
			keyEnd, err := validString(data, i)
			if err != nil {
				return "", err
			}
			key := data[i:keyEnd]
			i = skipSpace(data, keyEnd)
			if i >= len(data) || data[i] != ':' {
				return "", syntaxError(data, i, "expected ':' after a member name")
			}
			i = skipSpace(data, i+1)
			end, err := validValue(data, i, 1)
			if err != nil {
				return "", err
			}
			field, err := m.set(key, data[i:end])
			if err != nil {
				return "", err
			}
			if field >= 0 {
				if seen[field] && repeated == "" {
					repeated = envelopeFields[field]
				}
				seen[field] = true
			}
			i = skipSpace(data, end)
			if i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
				continue
			}
			if i < len(data) && data[i] == '}' {
				i++
				break
			}
			return "", syntaxError(data, i, "expected ',' or '}' in an object")
		}
	}
	if i = skipSpace(data, i); i != len(data) {
		return "", syntaxError(data, i, "unexpected data after the message")
	}
	return repeated, nil
}

// envelopeFields are the members of a message, in the order set numbers them.
var envelopeFields = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// set stores one top-level member, matching keys as encoding/json does:
// exactly, or failing that case-insensitively. It returns the index in
// envelopeFields of the field it set, or -1 for a member of no field.
func (m *Message) set(quotedKey, value []byte) (int, error) {
	var field int
	if inner := quotedKey[1 : len(quotedKey)-1]; plainASCII(inner) {
		field = foldKeyBytes(inner) // no string made for the common key
		if field < 0 || string(inner) != envelopeFields[field] {
			m.inexact = true
		}
	} else {
		m.inexact = true
		key, ok := StringValue(quotedKey)
		if !ok {
			return -1, errors.New("invalid member name")
		}
		field = foldKey(key)
	}
	raw := func(dst *json.RawMessage) { *dst = json.RawMessage(value) }
	str := func(dst *string, field string) error {
		if value[0] == 'n' {
			return nil // null leaves a string alone, as in encoding/json
		}
		if s, ok := knownString(value); ok {
			*dst = s
			return nil
		}
		s, ok := StringValue(value)
		if !ok {
			return fmt.Errorf("json: cannot unmarshal %s into Go struct field Message.%s of type string", kind(value), field)
		}
		*dst = s
		return nil
	}
	switch field {
	case 0:
		return field, str(&m.JSONRPC, "jsonrpc")
	case 1:
		raw(&m.ID)
	case 2:
		return field, str(&m.Method, "method")
	case 3:
		raw(&m.Params)
	case 4:
		raw(&m.Result)
	case 5:
		raw(&m.Error)
	}
	return field, nil
}

// foldKey returns the index in envelopeFields of the field encoding/json
// would store a member name in, or -1.
func foldKey(key string) int {
	for i, f := range envelopeFields {
		if len(key) == len(f) && (key == f || equalFoldASCII(key, f)) {
			return i
		}
	}
	return -1
}

// foldKeyBytes is foldKey for a name without escapes, without making a
// string of it.
func foldKeyBytes(key []byte) int {
	for i, f := range envelopeFields {
		if len(key) == len(f) && (string(key) == f || equalFoldASCII(string(key), f)) {
			return i
		}
	}
	return -1
}

// knownString returns the version and the methods of MCP that every
// message carries as constants, so that reading them allocates nothing.
func knownString(raw []byte) (string, bool) {
	switch string(raw) {
	case `"2.0"`:
		return "2.0", true
	case `"tools/call"`:
		return "tools/call", true
	case `"notifications/progress"`:
		return "notifications/progress", true
	case `"notifications/message"`:
		return "notifications/message", true
	case `"notifications/cancelled"`:
		return "notifications/cancelled", true
	case `"resources/read"`:
		return "resources/read", true
	case `"prompts/get"`:
		return "prompts/get", true
	case `"tools/list"`:
		return "tools/list", true
	case `"ping"`:
		return "ping", true
	}
	return "", false
}

func equalFoldASCII(a, b string) bool {
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != b[i] {
			return false
		}
	}
	return true
}

func kind(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case '"':
		return "string"
	case 'n':
		return "null"
	}
	return "number"
}

func syntaxError(data []byte, i int, what string) error {
	if i >= len(data) {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("invalid JSON at offset %d: %s", i, what)
}

// validValue validates the value starting at data[i] and returns the index
// just past it.
func validValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return 0, syntaxError(data, i, "expected a value")
	}
	switch c := data[i]; {
	case c == '"':
		return validString(data, i)
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return 0, errors.New("exceeded max depth")
		}
		return validContainer(data, i, depth+1)
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(data, i)
	case c == 't':
		return validLiteral(data, i, "true")
	case c == 'f':
		return validLiteral(data, i, "false")
	case c == 'n':
		return validLiteral(data, i, "null")
	}
	return 0, syntaxError(data, i, "expected a value")
}

func validContainer(data []byte, i, depth int) (int, error) {
	closer, isObject := byte(']'), data[i] == '{'
	if isObject {
		closer = '}'
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == closer {
		return i + 1, nil
	}
	for {
		if isObject {
			if i >= len(data) || data[i] != '"' {
				return 0, syntaxError(data, i, "expected a member name")
			}
			end, err := validString(data, i)
			if err != nil {
				return 0, err
			}
			i = skipSpace(data, end)
			if i >= len(data) || data[i] != ':' {
				return 0, syntaxError(data, i, "expected ':' after a member name")
			}
			i = skipSpace(data, i+1)
		}
		end, err := validValue(data, i, depth)
		if err != nil {
			return 0, err
		}
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
			continue
		}
		if i < len(data) && data[i] == closer {
			return i + 1, nil
		}
		return 0, syntaxError(data, i, "expected ',' or a closing bracket")
	}
}

// validString validates the string starting at data[i] and returns the
// index just past its closing quote.
//
// Strings are most of a message's bytes, and this is where validating them
// spends its time. A long string is not read byte by byte: its closing
// quote and its escapes are found with vectorised searches, and the runs
// between them are only checked for control characters, a word at a time.
// Every byte is searched a bounded number of times, whatever the escapes.
func validString(data []byte, i int) (int, error) {
	i++
	q := -1 // the next quote at or after i, or len(data) if there is none
	for {
		if q < i {
			if q = bytes.IndexByte(data[i:], '"'); q < 0 {
				q = len(data)
			} else {
				q += i
			}
		}
		run := q // the plain run [i, run) ends at the next escape or q
		if k := bytes.IndexByte(data[i:q], '\\'); k >= 0 {
			run = i + k
		}
		if c := indexControl(data[i:run]); c >= 0 {
			return 0, syntaxError(data, i+c, "control character in a string")
		}
		if run == q {
			if q == len(data) {
				return 0, syntaxError(data, q, "unterminated string")
			}
			return q + 1, nil
		}
		i = run + 1 // the escaped byte
		if i >= len(data) {
			return 0, syntaxError(data, i, "unterminated escape")
		}
		switch data[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+4 >= len(data) {
				return 0, syntaxError(data, len(data), "")
			}
			for _, h := range data[i+1 : i+5] {
				if !isHex(h) {
					return 0, syntaxError(data, i, "invalid \\u escape")
				}
			}
			i += 4
		default:
			return 0, syntaxError(data, i, "invalid escape")
		}
		i++
	}
}

// indexControl returns the index of the first control character (below
// 0x20) in b, or -1. Most words hold none: one test each.
func indexControl(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		// A byte of w is below 0x20 exactly when some byte of
		// (w - ones*0x20) &^ w has its high bit set.
		if w := binary.LittleEndian.Uint64(b[i:]); (w-ones*0x20)&^w&highs != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return -1
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// validNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(data []byte, i int) (int, error) {
	digits := func(i int) int {
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		return i
	}
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(i)
	default:
		return 0, syntaxError(data, i, "invalid number")
	}
	if i < len(data) && data[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, syntaxError(data, j, "invalid number")
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, syntaxError(data, j, "invalid number")
		}
		i = j
	}
	return i, nil
}

func validLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return 0, syntaxError(data, i, "invalid literal")
	}
	return i + len(lit), nil
}
