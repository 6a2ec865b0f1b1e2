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
	"tasks/get":                {top: []string{"taskId"}},
	"tasks/result":             {top: []string{"taskId"}},
	"tasks/cancel":             {top: []string{"taskId"}},
	"tasks/update":             {top: []string{"taskId"}},
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

// forwardedParams is what forwarding a request reads from its params: the
// name member when it is a string, and _meta and _meta.progressToken with
// their spans in params. Routing that read them already passes them on;
// they hold for the params they were read from (see of) and no others.
type forwardedParams struct {
	params    json.RawMessage // what they were read from; nil: unknown
	name      string
	token     json.RawMessage
	tokenSpan jsonrpc.Span
	hasToken  bool
	meta      json.RawMessage // nil: none
	metaSpan  jsonrpc.Span
}

// of reports whether f was read from exactly params.
func (f *forwardedParams) of(params json.RawMessage) bool {
	return len(f.params) > 0 && len(f.params) == len(params) && &f.params[0] == &params[0]
}

// renamed returns f for params, which are f's params with the name at
// span replaced by the JSON string of name (see the function renamed).
func (f forwardedParams) renamed(params json.RawMessage, span jsonrpc.Span, name string) forwardedParams {
	if f.params == nil || f.of(params) {
		return f // unknown, or not renamed
	}
	shift := len(params) - len(f.params)
	if f.hasToken && f.tokenSpan.Start > span.Start {
		f.tokenSpan = jsonrpc.Span{Start: f.tokenSpan.Start + shift, End: f.tokenSpan.End + shift}
		f.token = params[f.tokenSpan.Start:f.tokenSpan.End]
	}
	if f.meta != nil && f.metaSpan.Start > span.Start {
		f.metaSpan = jsonrpc.Span{Start: f.metaSpan.Start + shift, End: f.metaSpan.End + shift}
		f.meta = params[f.metaSpan.Start:f.metaSpan.End]
	}
	f.params, f.name = params, name
	return f
}

// forwarded reads in one pass over params what forwarding a request needs.
// A member that is missing or ambiguous is not found.
func forwarded(params json.RawMessage) forwardedParams {
	f := forwardedParams{params: params}
	var values [2]json.RawMessage
	var spans [2]jsonrpc.Span
	if jsonrpc.FindEachSpan(params, forwardedKeys, values[:], spans[:]) != nil {
		// One of them is ambiguous (a method whose name nobody decides
		// on): each is looked up on its own, as before.
		f.name, _, _ = stringParam(params, "name")
		f.token, f.tokenSpan, f.hasToken = jsonrpc.LookupPath(params, "_meta", "progressToken")
		f.meta, f.metaSpan, _ = jsonrpc.Lookup(params, "_meta")
		return f
	}
	f.name, _ = jsonrpc.StringValue(values[0])
	if values[1] != nil {
		f.setToken(values[1], spans[1])
	}
	return f
}

// setToken sets _meta, params' member meta at span, and the progress
// token in it; an ambiguous one is none.
func (f *forwardedParams) setToken(meta json.RawMessage, span jsonrpc.Span) {
	f.meta, f.metaSpan = meta, span
	if token, at, err := jsonrpc.Find(meta, "progressToken"); err == nil {
		f.withToken(token, at)
	}
}

// withToken records token, the progress token of f's _meta (nil for
// none), found at span within that _meta.
func (f *forwardedParams) withToken(token json.RawMessage, span jsonrpc.Span) {
	if token == nil {
		return
	}
	f.token, f.hasToken = token, true
	f.tokenSpan = jsonrpc.Span{Start: f.metaSpan.Start + span.Start, End: f.metaSpan.Start + span.End}
}

// toolCallKeys are the members of a tools/call's params: those
// checkDecided checks for it, in its order.
var toolCallKeys = []string{"name", "arguments", "_meta"}

// toolCallParams reads a tools/call's params in one pass: it refuses what
// checkDecided refuses, returns the tool's name and its span, as
// stringParam(params, "name") would, and what forwarding needs. head, if
// not nil, is the front's scan of these params (see Session.headOf),
// whose pass found the same members: params are not scanned again.
func toolCallParams(params json.RawMessage, head *RequestHead) (string, jsonrpc.Span, forwardedParams, error) {
	var values [3]json.RawMessage
	var spans [3]jsonrpc.Span
	var token json.RawMessage
	var tokenSpan jsonrpc.Span
	if len(params) > 0 && params[0] == '{' {
		scanned := head != nil && head.callOK
		if scanned {
			values, spans = head.call.values, head.call.spans
		} else if err := jsonrpc.FindEachSpan(params, toolCallKeys, values[:], spans[:]); err != nil {
			return "", jsonrpc.Span{}, forwardedParams{}, ambiguous(err, "params")
		}
		switch {
		case values[2] == nil:
		case scanned && head.tokenOK:
			token, tokenSpan = head.token, head.tokenSpan
		default:
			var err error
			if token, tokenSpan, err = jsonrpc.Find(values[2], "progressToken"); err != nil {
				return "", jsonrpc.Span{}, forwardedParams{}, ambiguous(err, "params._meta")
			}
		}
	}
	name, isString := jsonrpc.StringValue(values[0])
	if !isString {
		return "", spans[0], forwardedParams{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params.name must be a string")
	}
	f := forwardedParams{params: params, name: name}
	if values[2] != nil {
		f.meta, f.metaSpan = values[2], spans[2]
		f.withToken(token, tokenSpan)
	}
	return name, spans[0], f, nil
}
