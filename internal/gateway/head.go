package gateway

import (
	"encoding/json"

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
}

var headKeys = []string{"_meta", "name", "uri", "requestState", "inputResponses"}

// ScanHead reads params' members and those of its _meta that RequestHead
// holds, in one pass over params.
func ScanHead(params []byte) RequestHead {
	h := RequestHead{of: params}
	var values [5]json.RawMessage
	if err := jsonrpc.FindEach(params, headKeys, values[:]); err != nil {
		return RequestHead{Err: err, of: params}
	}
	if values[0] != nil {
		var meta [3]json.RawMessage
		if err := jsonrpc.FindEach(values[0], metaKeys, meta[:]); err != nil {
			return RequestHead{Err: err, of: params}
		}
		h.Version, h.Capabilities, h.LogLevel = meta[0], meta[1], meta[2]
	}
	h.Name, h.URI = values[1], values[2]
	h.Retry = values[3] != nil || values[4] != nil
	return h
}

var metaKeys = []string{MetaProtocolVersion, MetaClientCapabilities, MetaLogLevel}

// headOf returns the head of params if the front scanned it: the
// stateless request's own params, not those of a composite's step.
func (s *Session) headOf(params []byte) (*RequestHead, bool) {
	if s.one == nil {
		return nil, false
	}
	h := &s.one.head
	return h, len(h.of) > 0 && len(h.of) == len(params) && &h.of[0] == &params[0] && h.Err == nil
}
