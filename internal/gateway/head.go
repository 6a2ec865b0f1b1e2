package gateway

import (
	"encoding/json"
	"errors"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// RequestHead is what one pass over a request's params finds: what the
// front needs to tell a stateless request from a session's and check it
// against its headers, and what routing it would otherwise look up
// again. Only stateless requests are scanned for it.
type RequestHead struct {
	// Err is an ambiguous member (see jsonrpc.Find) of params or of
	// params._meta; the other fields are then unset.
	Err error
	// Version, Capabilities and LogLevel are the members of params._meta
	// that 2026-07-28 defines, nil when absent.
	Version, Capabilities, LogLevel json.RawMessage
	// Name is params.name and URI params.uri, each nil when absent.
	Name json.RawMessage
	URI  json.RawMessage
	// Retry reports whether params carry requestState or inputResponses:
	// a client's retry after an InputRequiredResult.
	Retry bool

	of []byte // the params scanned
	// call is params' name, arguments and _meta and their spans, in
	// toolCallKeys' order, for toolCallParams; callOK is false when the
	// pass found arguments ambiguous, which only toolCallParams refuses.
	call   toolCallScan
	callOK bool
	// token is params._meta.progressToken and its span in that _meta, nil
	// when absent: the pass over _meta found it for toolCallParams;
	// tokenOK is false when it found it ambiguous, or found no _meta.
	token     json.RawMessage
	tokenSpan jsonrpc.Span
	tokenOK   bool
}

// toolCallScan is what toolCallParams reads of params in its pass.
type toolCallScan struct {
	values [3]json.RawMessage
	spans  [3]jsonrpc.Span
}

// headKeys are the members of params the head holds, and arguments, which
// its pass finds for toolCallParams too.
var headKeys = []string{"_meta", "name", "uri", "requestState", "inputResponses", "arguments"}

// ScanHead reads params' members and those of its _meta that RequestHead
// holds, in one pass over params.
func ScanHead(params []byte) RequestHead {
	h := RequestHead{of: params}
	var values [6]json.RawMessage
	var spans [6]jsonrpc.Span
	var err error
	if h.callOK, err = findEachButLast(params, headKeys, values[:], spans[:]); err != nil {
		return RequestHead{Err: err, of: params}
	}
	if values[0] != nil {
		var meta [4]json.RawMessage
		var at [4]jsonrpc.Span
		if h.tokenOK, err = findEachButLast(values[0], metaKeys, meta[:], at[:]); err != nil {
			return RequestHead{Err: err, of: params}
		}
		h.Version, h.Capabilities, h.LogLevel = meta[0], meta[1], meta[2]
		h.token, h.tokenSpan = meta[3], at[3]
	}
	h.Name, h.URI = values[1], values[2]
	h.Retry = values[3] != nil || values[4] != nil
	if h.callOK {
		h.call = toolCallScan{
			values: [3]json.RawMessage{values[1], values[5], values[0]},
			spans:  [3]jsonrpc.Span{spans[1], spans[5], spans[0]},
		}
	}
	return h
}

// metaKeys are the members of params._meta the head holds.
// findEachButLast is jsonrpc.FindEachSpan for keys whose last one is not
// the head's to refuse when it is ambiguous (arguments, progressToken):
// toolCallParams, scanning for itself, refuses it as before. Such a last
// key is left unfound, and ok is false.
func findEachButLast(obj []byte, keys []string, values []json.RawMessage, spans []jsonrpc.Span) (ok bool, err error) {
	err = jsonrpc.FindEachSpan(obj, keys, values, spans)
	last := len(keys) - 1
	if a, isAmbiguous := errors.AsType[*jsonrpc.AmbiguousError](err); isAmbiguous && a.Key == keys[last] {
		values[last], spans[last] = nil, jsonrpc.Span{}
		return false, jsonrpc.FindEachSpan(obj, keys[:last], values[:last], spans[:last])
	}
	return true, err
}

var metaKeys = []string{MetaProtocolVersion, MetaClientCapabilities, MetaLogLevel, "progressToken"}

// headOf returns the head of params if the front scanned it (the
// stateless request's own params, not those of a composite's step) and
// found it unambiguous; otherwise nil.
func (s *Session) headOf(params []byte) *RequestHead {
	if s.one == nil {
		return nil
	}
	h := &s.one.head
	if len(h.of) == 0 || len(h.of) != len(params) || &h.of[0] != &params[0] || h.Err != nil {
		return nil
	}
	return h
}
