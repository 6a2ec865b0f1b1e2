package jsonrpc

import (
	"encoding/binary"
	"strings"
	"testing"
)

// The string scans as they were before they searched for quotes and
// escapes with bytes.IndexByte: byte by byte after a word-at-a-time skip.
// The fuzz target below holds the new ones to their answers.

func refSkipPlain(data []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(data) {
		w := binary.LittleEndian.Uint64(data[i:])
		quote, backslash := w^(ones*'"'), w^(ones*'\\')
		special := (w-ones*0x20)&^w | (quote-ones)&^quote | (backslash-ones)&^backslash
		if special&highs != 0 {
			return i
		}
		i += 8
	}
	return i
}

func refValidString(data []byte, i int) (int, error) {
	for i++; i < len(data); i++ {
		i = refSkipPlain(data, i)
		if i >= len(data) {
			break
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, syntaxError(data, i, "control character in a string")
		case c == '\\':
			i++
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
		}
	}
	return 0, syntaxError(data, i, "unterminated string")
}

func refSkipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errSyntax
	}
	for i++; i < len(b); i++ {
		if i = refSkipPlain(b, i); i >= len(b) {
			break
		}
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errSyntax
}

// FuzzStringScans: validString and skipString end every string where the
// byte-by-byte scans end it, and refuse what they refuse with the same
// error at the same offset.
func FuzzStringScans(f *testing.F) {
	for _, s := range []string{
		`"plain"`, `"a\"b"`, `"\\"`, `"\\\""`, `"\u00e9x"`, `"\u00"`, `"\x"`, "\"a\x01b\"", `"unterminated`,
		`"` + strings.Repeat(`x\n`, 40) + `"`, `"` + strings.Repeat("y", 70) + `\`, `"é\"` + strings.Repeat("z", 30) + `"tail"`,
		"\"" + strings.Repeat("w", 17) + "\x1f\"", `"\u12G4"`, `""`, `"`,
		// skipString's words: a backslash or quote at each end of one, an
		// escape across two, one at the end of the data, and a string
		// longer than the words it scans one at a time.
		`"1234567\"89"`, `"12345678\"9"`, `"1234567"`, `"12345678"`, `"1234567\`, `"123456\\"`,
		`"` + strings.Repeat("v", 47) + `\"` + strings.Repeat("u", 20) + `"`, `"` + strings.Repeat("s", 55) + `\`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			data = append([]byte{'"'}, data...)
		}
		end, err := validString(data, 0)
		wantEnd, wantErr := refValidString(data, 0)
		if end != wantEnd || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("validString(%q) = %d, %v; want %d, %v", data, end, err, wantEnd, wantErr)
		}
		end, err = skipString(data, 0)
		wantEnd, wantErr = refSkipString(data, 0)
		if end != wantEnd || (err == nil) != (wantErr == nil) {
			t.Errorf("skipString(%q) = %d, %v; want %d, %v", data, end, err, wantEnd, wantErr)
		}
	})
}

// BenchmarkStringScans: a long plain string, as a 1 KiB text argument is,
// and a long one with an escape every 40 bytes, as a text file's lines
// are. Both scans stay linear in the string's length.
func BenchmarkStringScans(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"plain-1KiB", `"` + strings.Repeat("z", 1024) + `"`},
		{"lines-64KiB", `"` + strings.Repeat(strings.Repeat("t", 38)+`\n`, 64<<10/40) + `"`},
	} {
		data := []byte(c.s)
		b.Run("valid/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := validString(data, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("skip/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := skipString(data, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
