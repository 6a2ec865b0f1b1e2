package gateway

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Members of params that routing, the policy or the audit read, by method.
// The gateway decides on them and forwards params as the client sent them,
// so each must be one member, spelled exactly: a repeated member is read
// as the first by some parsers and as the last by most, and Go's
// encoding/json also reads one spelled in another case. Such a message is
// refused rather than forwarded (checkDecided); jsonrpc.Lookup itself
// never returns an ambiguous member, so a lookup this table misses sees
// none.
var decidedByMethod = map[string]decided{
	"tools/call":               {top: []string{"name", "arguments"}},
	"prompts/get":              {top: []string{"name", "arguments"}},
	"resources/read":           {top: []string{"uri"}},
	"resources/subscribe":      {top: []string{"uri"}},
	"resources/unsubscribe":    {top: []string{"uri"}},
	"completion/complete":      {top: []string{"ref"}, nested: []string{"type", "name", "uri"}},
	"logging/setLevel":         {top: []string{"level"}},
	"tools/list":               {top: []string{"cursor"}},
	"prompts/list":             {top: []string{"cursor"}},
	"resources/list":           {top: []string{"cursor"}},
	"resources/templates/list": {top: []string{"cursor"}},
	"notifications/cancelled":  {top: []string{"requestId", "reason"}},
}

// decided lists members of params: top ones, and nested ones in the
// object that is the first top one.
type decided struct {
	top, nested []string
}

// maxDecided bounds the members of one object checkDecided looks at.
const maxDecided = 8

// checkDecided returns an invalid-request error when a member of params
// the gateway decides on is ambiguous, or nil. Every request's
// _meta.progressToken counts too. Each object is read once.
func checkDecided(method string, params json.RawMessage, request bool) error {
	if len(params) == 0 || params[0] != '{' {
		return nil
	}
	d := decidedByMethod[method]
	var keys [maxDecided]string
	var values [maxDecided]json.RawMessage
	top := append(keys[:0], d.top...)
	if request {
		top = append(top, "_meta")
	}
	if err := jsonrpc.FindEach(params, top, values[:len(top)]); err != nil {
		return ambiguous(err, "params")
	}
	if request && values[len(top)-1] != nil {
		if _, _, err := jsonrpc.Find(values[len(top)-1], "progressToken"); err != nil {
			return ambiguous(err, "params._meta")
		}
	}
	if len(d.nested) > 0 && values[0] != nil {
		if err := jsonrpc.FindEach(values[0], d.nested, values[:len(d.nested)]); err != nil {
			return ambiguous(err, "params."+d.top[0])
		}
	}
	return nil
}

func ambiguous(err error, where string) error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "invalid request: in %s, %v; mcpgate decides on this member, so it must appear once, spelled exactly", where, err)
}

// forwardedKeys are the members of params a forwarded request needs.
var forwardedKeys = []string{"name", "_meta"}

// forwarded reads in one pass over params what forwarding a request needs:
// the name member when it is a string, and _meta.progressToken with its
// span in params. A member that is missing or ambiguous is not found.
func forwarded(params json.RawMessage) (name string, token json.RawMessage, tokenSpan jsonrpc.Span, hasToken bool) {
	var values [2]json.RawMessage
	var spans [2]jsonrpc.Span
	if jsonrpc.FindEachSpan(params, forwardedKeys, values[:], spans[:]) != nil {
		// One of them is ambiguous (a method whose name nobody decides
		// on): each is looked up on its own, as before.
		name, _, _ = stringParam(params, "name")
		token, tokenSpan, hasToken = jsonrpc.LookupPath(params, "_meta", "progressToken")
		return name, token, tokenSpan, hasToken
	}
	name, _ = jsonrpc.StringValue(values[0])
	if values[1] == nil {
		return name, nil, jsonrpc.Span{}, false
	}
	token, span, err := jsonrpc.Find(values[1], "progressToken")
	if err != nil || token == nil {
		return name, nil, jsonrpc.Span{}, false
	}
	base := spans[1].Start
	return name, token, jsonrpc.Span{Start: base + span.Start, End: base + span.End}, true
}
