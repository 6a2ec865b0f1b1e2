// Package jsonrpc parses, builds and rewrites JSON-RPC 2.0 messages without re-encoding their payloads.
//
// A Message keeps id, params, result and error as the exact bytes the peer
// sent. Outgoing messages are assembled by appending those bytes into a new
// envelope, so a request id such as "caf\u00e9" or 9007199254740993 comes back
// byte for byte, and params or results are never decoded on the way through.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Message is one JSON-RPC 2.0 request, notification or response.
// Its raw fields alias the buffer it was parsed from.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`

	buf     []byte // what ParseRoom parsed, with its spare room in front
	room    int    // the spare bytes in front of the message in buf
	inexact bool   // a member was spelled in another case, or is not one of the envelope's
}

// IsRequest reports whether m is a request: a method and an id.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification: a method and no id.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m is a response: an id and a result or an error.
func (m *Message) IsResponse() bool {
	return m.Method == "" && m.ID != nil && (m.Result != nil || m.Error != nil)
}

// Parse decodes one JSON-RPC message. It checks the envelope only: version,
// the kind of message, and the type of the id. Params and results stay raw.
func Parse(data []byte) (*Message, error) {
	var m Message
	repeated, err := scanEnvelope(data, &m)
	if err != nil {
		if !json.Valid(data) {
			return nil, &Error{Code: CodeParseError, Message: "parse error: " + err.Error()}
		}
		// Valid JSON that is not a message: a bare value, or a member of
		// the wrong type. JSON-RPC calls that an invalid request.
		if v := bytes.TrimLeft(data, " \t\r\n"); v[0] != '{' {
			return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: a message is a JSON object, not JSON " + kind(v)}
		}
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: " + err.Error()}
	}
	if repeated != "" {
		// Parsers disagree on a repeated member (the first or the last
		// wins); what is decided here must be what the peer acts on.
		return nil, &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("invalid request: member %q appears more than once", repeated)}
	}
	if m.JSONRPC != "2.0" {
		return nil, &Error{Code: CodeInvalidRequest, Message: `invalid request: "jsonrpc" must be "2.0"`}
	}
	if m.ID != nil && !validID(m.ID) {
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: id must be a string, a number or null"}
	}
	if m.Params != nil && m.Params[0] != '{' && m.Params[0] != '[' && m.Params[0] != 'n' {
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: params must be an object or an array, not JSON " + kind(m.Params)}
	}
	if m.Method != "" && string(m.ID) == "null" {
		// JSON-RPC discourages it and MCP forbids it: a null id cannot be
		// told from the id of an error about an unreadable message.
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: the id of a request must be a string or an integer, not null"}
	}
	if !m.IsRequest() && !m.IsNotification() && !m.IsResponse() {
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: neither a request, a notification nor a response"}
	}
	return &m, nil
}

// ParseBatch decodes a JSON array of messages. Each element is returned as
// its raw bytes so the caller can parse and answer them one by one.
func ParseBatch(data []byte) ([]json.RawMessage, error) {
	var batch []json.RawMessage
	if err := json.Unmarshal(data, &batch); err != nil {
		return nil, &Error{Code: CodeParseError, Message: "parse error: " + err.Error()}
	}
	if len(batch) == 0 {
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: empty batch"}
	}
	return batch, nil
}

// IsBatch reports whether data holds a JSON array rather than an object.
func IsBatch(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '['
}

func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"', 'n':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// Error is a JSON-RPC error object. It is also a Go error.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Errorf returns an *Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError converts err to a JSON-RPC error object, keeping an *Error found in
// its chain and reporting anything else as an internal error.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalError, Message: err.Error()}
}

// DecodeError decodes the raw error member of a response.
func DecodeError(raw json.RawMessage) *Error {
	var e Error
	if err := json.Unmarshal(raw, &e); err != nil {
		return &Error{Code: CodeInternalError, Message: "malformed error object: " + string(raw)}
	}
	return &e
}

// AppendRequest appends a request with the given raw id and params.
// Params may be nil.
func AppendRequest(dst []byte, id json.RawMessage, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	return appendMethodParams(dst, method, params)
}

// AppendRequestWithout is AppendRequest for params with the members named
// keys left out of the object at params[at] (see AppendWithout), as the
// message is written: what is cut out is never copied on its own.
func AppendRequestWithout(dst []byte, id json.RawMessage, method string, params json.RawMessage, at Span, keys []string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	dst = append(dst, `,"params":`...)
	dst = append(dst, params[:at.Start]...)
	dst, _ = AppendWithout(dst, params[at.Start:at.End], keys)
	dst = append(dst, params[at.End:]...)
	return append(dst, '}')
}

// AppendNotification appends a notification. Params may be nil.
func AppendNotification(dst []byte, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	return appendMethodParams(dst, method, params)
}

func appendMethodParams(dst []byte, method string, params json.RawMessage) []byte {
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendResult appends a successful response carrying the raw result.
func AppendResult(dst []byte, id, result json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendRawError appends an error response carrying a raw error object.
func AppendRawError(dst []byte, id, errObj json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":`...)
	dst = append(dst, errObj...)
	return append(dst, '}')
}

// AppendError appends an error response. A nil id is written as null, as the
// specification demands when the request's id could not be read.
func AppendError(dst []byte, id json.RawMessage, e *Error) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, e.Message)
	if e.Data != nil {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	return append(dst, "}}"...)
}

// IntID returns the raw form of an integer id.
func IntID(n int64) json.RawMessage { return strconv.AppendInt(nil, n, 10) }

// AppendString appends s as a JSON string. Unlike encoding/json it does not
// escape <, > and &, which JSON does not require.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
