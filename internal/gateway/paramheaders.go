package gateway

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// HeaderParamPrefix starts the name of the headers that mirror a tool's
// parameters (MCP 2026-07-28, x-mcp-header in its inputSchema).
const HeaderParamPrefix = "Mcp-Param-"

// checkParamHeaders checks a stateless tools/call's Mcp-Param-* headers
// against its arguments, as 2026-07-28 demands of a server that reads the
// body: every annotated parameter that has a value (not null) in the body
// has exactly one header whose value, decoded from =?base64?…?= if so
// encoded, is the body's; a header of a parameter without a value is not
// expected and not checked. hdr is the client's: untrusted.
func checkParamHeaders(hdr http.Header, params []byte, want []catalog.ParamHeader) *jsonrpc.Error {
	args, _, _ := jsonrpc.Lookup(params, "arguments")
	for _, p := range want {
		name := HeaderParamPrefix + p.Name
		body, _, ok := jsonrpc.LookupPath(args, p.Path...)
		if !ok || string(body) == "null" {
			continue
		}
		hv := hdr.Values(name)
		if len(hv) != 1 {
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: send exactly one %s header, equal to params.arguments.%s", name, strings.Join(p.Path, "."))
		}
		value, ok := DecodeHeaderValue(hv[0])
		if !ok {
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: %s header is malformed: use visible ASCII, or =?base64?...?= for anything else", name)
		}
		if !sameParam(value, body) {
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: %s header does not match params.arguments.%s", name, strings.Join(p.Path, "."))
		}
	}
	return nil
}

// sameParam reports whether a header's (decoded) value stands for the
// JSON value body: a string as is, a number compared as a number (42.0 is
// 42), a boolean as true or false.
func sameParam(value string, body []byte) bool {
	if s, ok := jsonrpc.StringValue(body); ok {
		return s == value
	}
	switch string(body) {
	case "true", "false":
		return value == string(body)
	}
	if len(body) > 0 && (body[0] == '-' || body[0] >= '0' && body[0] <= '9') {
		a, errA := strconv.ParseFloat(string(body), 64)
		b, errB := strconv.ParseFloat(value, 64)
		return errA == nil && errB == nil && a == b
	}
	return false // an object or array is not mirrored
}

// DecodeHeaderValue returns the value an Mcp-Name or Mcp-Param-* header
// carries: as is if plain, or decoded from its =?base64?...?= form. It
// reports false for characters a header value must not have, or a
// malformed encoding.
func DecodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil || !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", false
		}
	}
	return v, true
}
