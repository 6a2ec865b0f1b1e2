package jsonrpc

import (
	"bytes"
	"encoding/json"
	"slices"
)

// PrependMembers returns a copy of the JSON object obj with members, one
// or more `"key":value` pairs joined by commas, inserted as its first
// members; the rest of obj is kept byte for byte. An empty obj or null is
// taken as {}. Anything else that is not an object gives an error.
func PrependMembers(obj, members []byte) ([]byte, error) {
	i := skipSpace(obj, 0)
	if i == len(obj) || bytes.Equal(bytes.TrimSpace(obj), []byte("null")) {
		out := make([]byte, 0, len(members)+2)
		out = append(out, '{')
		out = append(out, members...)
		return append(out, '}'), nil
	}
	if obj[i] != '{' {
		return nil, errSyntax
	}
	j := skipSpace(obj, i+1)
	if j == len(obj) {
		return nil, errSyntax
	}
	out := make([]byte, 0, len(obj)+len(members)+1)
	out = append(out, obj[:i+1]...)
	out = append(out, members...)
	if obj[j] != '}' {
		out = append(out, ',')
	}
	return append(out, obj[i+1:]...), nil
}

// SetMember returns a copy of the JSON object obj with member key set to
// value: replaced where obj has it, added first where it does not. An
// ambiguous member (see Find) is an error: which one a peer reads is not
// known.
func SetMember(obj []byte, key string, value []byte) ([]byte, error) {
	old, span, err := Find(obj, key)
	if err != nil {
		return nil, err
	}
	if old != nil {
		return Replace(obj, span, value), nil
	}
	return PrependMembers(obj, appendMember(nil, key, value))
}

// appendMember appends `"key":value`.
func appendMember(dst []byte, key string, value []byte) []byte {
	dst = AppendString(dst, key)
	dst = append(dst, ':')
	return append(dst, value...)
}

// WithoutMembers returns a copy of the JSON object obj without its
// top-level members named keys (exactly; see Find for names in another
// case, which are an error). Every other member is kept byte for byte,
// in order, joined by commas. obj is returned as is when it has none of
// them.
func WithoutMembers(obj []byte, keys ...string) ([]byte, error) {
	values := make([]json.RawMessage, len(keys))
	if err := FindEach(obj, keys, values); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(values, func(v json.RawMessage) bool { return v != nil }) {
		return obj, nil
	}
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	i := skipSpace(obj, 0) + 1
	first := true
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return nil, errSyntax
		}
		if obj[i] == '}' {
			return append(out, '}'), nil
		}
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		start := i
		keyEnd, err := skipString(obj, i)
		if err != nil {
			return nil, err
		}
		i = skipSpace(obj, keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return nil, errSyntax
		}
		end, err := skipValue(obj, skipSpace(obj, i+1))
		if err != nil {
			return nil, err
		}
		name, _ := StringValue(json.RawMessage(obj[start:keyEnd]))
		if !slices.Contains(keys, name) {
			if !first {
				out = append(out, ',')
			}
			out = append(out, obj[start:end]...)
			first = false
		}
		i = end
	}
}
