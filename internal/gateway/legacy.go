package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Between the eras: what 2026-07-28 adds to messages is taken out where
// the other side speaks an earlier version, as a server of that version
// would have written them, and nothing else is changed. A 2025 session
// gets a modern backend's results and notifications without resultType,
// the caching hints, the backend's serverInfo or our subscriptionId (which
// would tell it what runs behind the gateway); a backend of the legacy era
// gets a stateless request without the _meta members that say the
// request's version, capabilities, client and log level, which it would
// not understand (the gateway acts on them itself).

// modernResultMembers are the members 2026-07-28 adds to results.
var modernResultMembers = []string{"resultType", "ttlMs", "cacheScope"}

// modernResultMeta are the members 2026-07-28 adds to a result's or a
// notification's _meta.
var modernResultMeta = []string{MetaServerInfo, MetaSubscriptionID}

// modernRequestMeta are the members 2026-07-28 adds to a request's _meta
// (backend.Conn.GoWithout leaves out the same).
var modernRequestMeta = []string{MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo, MetaLogLevel}

// modernMetaPrefix begins the name of every member 2026-07-28 defines.
var modernMetaPrefix = []byte(`"io.modelcontextprotocol/`)

// legacyResult returns result, a modern backend's, as a 2025 session gets
// it: without modernResultMembers, and without modernResultMeta in its
// _meta (or without a _meta left empty). A result without any of them is
// returned as it is, and so is one that cannot be read.
func legacyResult(result json.RawMessage) json.RawMessage {
	if !bytes.Contains(result, []byte(`"resultType"`)) && !bytes.Contains(result, []byte(`"io.modelcontextprotocol/`)) &&
		!bytes.Contains(result, []byte(`"ttlMs"`)) && !bytes.Contains(result, []byte(`"cacheScope"`)) {
		return result // one vectorised search each: what most results take
	}
	return withoutModern(result, modernResultMembers)
}

// legacyParams returns a notification's params, as a 2025 session gets
// them: without modernResultMeta in _meta.
func legacyParams(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"io.modelcontextprotocol/`)) {
		return params
	}
	return withoutModern(params, nil)
}

// withoutModern returns obj without the members drop, and without
// modernResultMeta in its _meta, which goes too when nothing is left in
// it.
func withoutModern(obj json.RawMessage, drop []string) json.RawMessage {
	meta, span, err := jsonrpc.Find(obj, "_meta")
	if err != nil {
		return obj // ambiguous: left to the client, as the backend sent it
	}
	keys := drop
	if meta != nil {
		trimmed, n := jsonrpc.AppendWithout(nil, meta, modernResultMeta)
		switch {
		case n > 0 && emptyObject(bytes.TrimLeft(trimmed, " \t\r\n")[1:]):
			keys = append(append([]string(nil), drop...), "_meta")
		case n > 0:
			obj = jsonrpc.Replace(obj, span, trimmed)
		}
	}
	if len(keys) == 0 {
		return obj
	}
	out, _ := jsonrpc.AppendWithout(make([]byte, 0, len(obj)), obj, keys)
	return out
}

// legacyRequestParams returns params, a stateless request's going to a
// backend of the legacy era, without modernRequestMeta in its _meta, whose
// value meta is at span (see forwardedParams): a copy, for what
// backend.Conn.GoWithout cannot cut as it writes. Without such members
// params are returned as they are.
func legacyRequestParams(params, meta json.RawMessage, span jsonrpc.Span) json.RawMessage {
	if !bytes.Contains(meta, modernMetaPrefix) {
		return params
	}
	out := make([]byte, 0, len(params))
	out = append(out, params[:span.Start]...)
	out, n := jsonrpc.AppendWithout(out, meta, modernRequestMeta)
	if n == 0 {
		return params
	}
	return append(out, params[span.End:]...)
}
