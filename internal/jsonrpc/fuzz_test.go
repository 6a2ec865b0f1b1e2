package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzParse checks the envelope parser on any input: it never panics; an
// error is a JSON-RPC error whose code says what JSON-RPC says (-32700 for
// what is not JSON, -32600 for JSON that is no message); a message is
// exactly one of request, notification and response, never a request with
// a null id; and what the gateway builds from it is JSON that parses back
// to the same id and method.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}`,
		`{"jsonrpc":"2.0","id":"a\u00e9","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, `42`, `"s"`, `null`, `[]`, `[{}]`,
		`{"JsonRpc":"2.0","ID":1,"Method":"m"}`, `{"jsonrpc":"2.0","id":1e400,"method":"m"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", `{"a":[[[[[[[[[[]]]]]]]]]]}`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) error %T is no *Error", data, err)
			}
			switch valid := json.Valid(data); {
			case e.Code == CodeParseError && valid:
				t.Fatalf("Parse(%q) = parse error %q for valid JSON", data, e.Message)
			case e.Code == CodeInvalidRequest && !valid:
				t.Fatalf("Parse(%q) = invalid request %q for invalid JSON", data, e.Message)
			case e.Code != CodeParseError && e.Code != CodeInvalidRequest:
				t.Fatalf("Parse(%q) = code %d", data, e.Code)
			}
			if out := AppendError(nil, nil, e); !json.Valid(out) {
				t.Fatalf("error response %q is not JSON", out)
			}
			return
		}
		kinds := 0
		for _, k := range []bool{m.IsRequest(), m.IsNotification(), m.IsResponse()} {
			if k {
				kinds++
			}
		}
		if kinds != 1 {
			t.Fatalf("Parse(%q) = %+v, which is %d kinds of message", data, m, kinds)
		}
		if m.IsRequest() && string(m.ID) == "null" {
			t.Fatalf("Parse(%q) accepted a request with id null", data)
		}
		var out []byte
		switch {
		case m.IsRequest():
			out = AppendRequest(nil, m.ID, m.Method, m.Params)
		case m.IsNotification():
			out = AppendNotification(nil, m.Method, m.Params)
		default:
			out = AppendResult(nil, m.ID, json.RawMessage(`{}`))
		}
		back, err := Parse(out)
		if err != nil || string(back.ID) != string(m.ID) || (m.Method != "" && !utf8Equal(back.Method, m.Method)) {
			t.Fatalf("rebuilt %q from %q parses to %+v, %v", out, data, back, err)
		}
	})
}

// utf8Equal compares method names as a JSON decoder sees them: invalid
// UTF-8 becomes U+FFFD on every decode.
func utf8Equal(a, b string) bool {
	return bytes.Equal(bytes.ToValidUTF8([]byte(a), []byte("\uFFFD")), bytes.ToValidUTF8([]byte(b), []byte("\uFFFD")))
}

// FuzzLineReader checks the stdio framing against a plain model: lines are
// what lies between newlines, without a CR before the newline, empty ones
// skipped; a line over the limit is reported once, with its first bytes,
// and reading goes on with the next line; no line ever exceeds the limit.
// repeat makes inputs longer than the reader's 64 KiB buffer; the reader
// gets its input in pieces of varied size.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\r\n\n{\"b\":2}\nlast"), uint16(100), uint8(0))
	f.Add([]byte("xxxxxxxxxx\n"), uint16(3), uint8(200))
	f.Add([]byte("\r\r\n\r\n"), uint16(1), uint8(1))
	f.Add([]byte("abc"), uint16(65535), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16, repeat uint8) {
		if limit == 0 {
			limit = 1
		}
		input := bytes.Repeat(data, int(repeat)+1)
		var want []string // lines, or "!" + head prefix for a line too long
		pieces := bytes.Split(input, []byte("\n"))
		for i, piece := range pieces {
			line := bytes.TrimSuffix(piece, []byte("\r"))
			switch {
			case len(line) == 0:
			case len(line) > int(limit):
				if i < len(pieces)-1 {
					piece = append(piece, '\n')
				}
				want = append(want, "!"+string(piece))
			default:
				want = append(want, string(line))
			}
		}
		var r io.Reader = bytes.NewReader(input)
		if len(data) > 0 && data[0]%2 == 0 {
			r = iotest.HalfReader(r)
		}
		lr := NewLineReader(r, int64(limit))
		var got []string
		for {
			line, err := lr.Next()
			var tl *ErrLineTooLong
			if errors.As(err, &tl) {
				if len(tl.Head) > headLen {
					t.Fatalf("head of %d bytes", len(tl.Head))
				}
				got = append(got, "!"+string(tl.Head))
				continue
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(line) > int(limit) || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line %q over the limit %d or with a newline", line, limit)
			}
			got = append(got, string(line))
		}
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d:\n got %q\nwant %q", len(got), len(want), got, want)
		}
		for i := range got {
			// A too-long line's head is some of its first bytes: what
			// was read when the line became too long, up to headLen.
			if got[i] != want[i] && !(got[i][0] == '!' && want[i][0] == '!' && strings.HasPrefix(want[i], got[i])) {
				t.Fatalf("line %d = %q, want %q", i, got[i], want[i])
			}
		}
	})
}
