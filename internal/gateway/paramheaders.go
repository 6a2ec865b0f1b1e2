package gateway

import (
	"encoding/base64"
	"errors"
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
		body, _, err := jsonrpc.FindPath(args, p.Path...)
		var ambiguous *jsonrpc.AmbiguousError
		if errors.As(err, &ambiguous) {
			// The header could match one reading and the backend read
			// another: an intermediary that trusts it would be misled.
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: params.arguments.%s, which %s mirrors, is ambiguous: %v", strings.Join(p.Path, "."), name, err)
		}
		if err != nil || body == nil || string(body) == "null" {
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
// JSON value body: a string as is, a number compared as a decimal number,
// exactly (42.0 is 42, 4.2e1 too; 9007199254740993 is not
// 9007199254740992, as it would be in float64), a boolean as true or
// false.
func sameParam(value string, body []byte) bool {
	if s, ok := jsonrpc.StringValue(body); ok {
		return s == value
	}
	switch string(body) {
	case "true", "false":
		return value == string(body)
	}
	if len(body) > 0 && (body[0] == '-' || body[0] >= '0' && body[0] <= '9') {
		a, okA := decimalKey(string(body))
		b, okB := decimalKey(value)
		return okA && okB && a == b
	}
	return false // an object or array is not mirrored
}

// decimalKey returns one spelling per decimal number of the JSON number
// n: its sign, its digits without leading or trailing zeros, and the
// exponent that makes them n. ok is false for what is no JSON number, or
// one whose exponent has more than 9 digits.
func decimalKey(n string) (key string, ok bool) {
	neg := strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	e := 0
	if hasExp {
		exp = strings.TrimPrefix(exp, "+")
		if len(strings.TrimPrefix(exp, "-")) > 9 {
			return "", false
		}
		var err error
		if e, err = strconv.Atoi(exp); err != nil {
			return "", false
		}
	}
	if whole == "" || (len(whole) > 1 && whole[0] == '0') || strings.Contains(mant, ".") && frac == "" ||
		strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return "", false
	}
	digits := strings.TrimLeft(whole+frac, "0")
	e -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	e += len(digits) - len(trimmed)
	if trimmed == "" {
		return "0", true // -0 is 0
	}
	if neg {
		trimmed = "-" + trimmed
	}
	return trimmed + "e" + strconv.Itoa(e), true
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
