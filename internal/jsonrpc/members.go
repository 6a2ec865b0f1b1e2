package jsonrpc

import "bytes"

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

// AppendWithout appends to dst the JSON object obj without its members
// named one of keys (every one of them, if repeated; a name in another
// case is another member), the members it keeps byte for byte, and
// reports how many it left out. When obj is not an
// object, or cannot be walked, it appends obj unchanged and reports 0.
func AppendWithout(dst, obj []byte, keys []string) ([]byte, int) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return append(dst, obj...), 0
	}
	start := len(dst)
	dst = append(dst, obj[:i+1]...)
	i++
	dropped, kept := 0, 0
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return append(dst[:start], obj...), 0
		}
		if obj[i] == '}' {
			return append(dst, obj[i:]...), dropped
		}
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		keyStart := i
		keyEnd, err := skipString(obj, i)
		if err != nil {
			return append(dst[:start], obj...), 0
		}
		j := skipSpace(obj, keyEnd)
		if j >= len(obj) || obj[j] != ':' {
			return append(dst[:start], obj...), 0
		}
		end, err := skipValue(obj, skipSpace(obj, j+1))
		if err != nil {
			return append(dst[:start], obj...), 0
		}
		quoted := obj[keyStart:keyEnd]
		plain := plainASCII(quoted[1 : len(quoted)-1])
		drop := false
		for _, k := range keys {
			if plain && len(quoted)-2 != len(k) {
				continue // what matchKey would say first, without the call
			}
			if matchKey(quoted, plain, k) == matchExact {
				drop = true
				break
			}
		}
		if drop {
			dropped++
		} else {
			if kept > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, obj[keyStart:end]...)
			kept++
		}
		i = end
	}
}
