// Package splice finds values in a JSON-RPC line by scanning its bytes,
// without decoding it: what a gateway or server at the physical floor does.
package splice

import "bytes"

// Field returns the raw bytes of the value of key in the JSON object obj,
// looking only at obj's own members (not nested ones), and whether it was
// found. The value is returned as written: a string keeps its quotes.
func Field(obj []byte, key string) (start, end int, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return 0, 0, false
		}
		kEnd := skipString(obj, i)
		if kEnd < 0 {
			return 0, 0, false
		}
		match := kEnd-i-2 == len(key) && string(obj[i+1:kEnd-1]) == key
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(obj, i+1)
		vEnd := skipValue(obj, i)
		if vEnd < 0 {
			return 0, 0, false
		}
		if match {
			return i, vEnd, true
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			return 0, 0, false
		}
		i++
	}
}

// Value is Field returning the bytes instead of their bounds; nil if key is
// absent.
func Value(obj []byte, key string) []byte {
	s, e, ok := Field(obj, key)
	if !ok {
		return nil
	}
	return obj[s:e]
}

// Replace returns line with the value of its top-level key replaced by
// value, appended to dst; ok is false when key is absent.
func Replace(dst, line []byte, key string, value []byte) ([]byte, bool) {
	s, e, ok := Field(line, key)
	if !ok {
		return dst, false
	}
	dst = append(dst, line[:s]...)
	dst = append(dst, value...)
	return append(dst, line[e:]...), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"',
// or -1.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexAny(b[i:], `"\`)
		if j < 0 {
			return -1
		}
		i += j
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // an escape: skip the backslash and the byte it escapes
		if i > len(b) {
			return -1
		}
	}
}

// skipValue returns the index after the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
