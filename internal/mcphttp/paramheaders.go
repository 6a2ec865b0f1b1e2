package mcphttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// HeaderParamPrefix starts the name of the headers that mirror a tool's
// parameters (2026-07-28: x-mcp-header in the tool's inputSchema).
const HeaderParamPrefix = "Mcp-Param-"

// ParamHeader is a tool parameter that 2026-07-28 mirrors into an HTTP
// header: the property of the tool's inputSchema annotated with
// "x-mcp-header": Name travels as Mcp-Param-{Name} beside the body, where
// Path (property names from the arguments object down) holds its value.
type ParamHeader struct {
	Name string
	Path []string
}

// maxParamDepth bounds how deep into nested properties annotations are
// looked for.
const maxParamDepth = 8

// ParamHeaders returns the x-mcp-header annotations of a tool (an object
// of a tools/list result) that are statically reachable through
// "properties" alone, the only place 2026-07-28 allows them. It reads
// nothing unless the tool mentions x-mcp-header at all, so tools without
// it cost nothing.
func ParamHeaders(tool json.RawMessage) []ParamHeader {
	if !bytes.Contains(tool, []byte(`"x-mcp-header"`)) {
		return nil
	}
	schema, _, ok := jsonrpc.Lookup(tool, "inputSchema")
	if !ok {
		return nil
	}
	var out []ParamHeader
	collectParamHeaders(schema, nil, &out)
	return out
}

func collectParamHeaders(schema json.RawMessage, path []string, out *[]ParamHeader) {
	if len(path) >= maxParamDepth {
		return
	}
	props, _, ok := jsonrpc.Lookup(schema, "properties")
	if !ok {
		return
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(props, &members) != nil {
		return
	}
	for key, prop := range members {
		at := append(path[:len(path):len(path)], key)
		if raw, _, ok := jsonrpc.Lookup(prop, "x-mcp-header"); ok {
			if name, ok := jsonrpc.StringValue(raw); ok && name != "" {
				*out = append(*out, ParamHeader{Name: name, Path: at})
			}
		}
		collectParamHeaders(prop, at, out)
	}
}

// Param is one Mcp-Param-* header of a request: the header's Name after
// the prefix, and the value it carries, not yet encoded.
type Param struct{ Name, Value string }

// MirroredParams returns the Mcp-Param-* headers a 2026-07-28 client sends
// with a tools/call whose params are params, for the tool's annotated
// parameters: one for each that has a value in arguments, a string as is,
// a number in its JSON form, a boolean as true or false; none for a
// parameter that is absent or null.
func MirroredParams(params json.RawMessage, annotated []ParamHeader) []Param {
	if len(annotated) == 0 {
		return nil
	}
	args, _, _ := jsonrpc.Lookup(params, "arguments")
	var out []Param
	for _, p := range annotated {
		raw, _, ok := jsonrpc.LookupPath(args, p.Path...)
		if !ok || len(raw) == 0 {
			continue
		}
		var value string
		switch c := raw[0]; {
		case c == '"':
			value, ok = jsonrpc.StringValue(raw)
		case c == 't' || c == 'f':
			value, ok = string(raw), string(raw) == "true" || string(raw) == "false"
		case c == '-' || c >= '0' && c <= '9':
			_, err := strconv.ParseFloat(string(raw), 64)
			value, ok = string(raw), err == nil
		default:
			ok = false // null, an object or an array: not mirrored
		}
		if ok {
			out = append(out, Param{Name: p.Name, Value: value})
		}
	}
	return out
}

// setParams sets the Mcp-Param-* headers of params on header.
func setParams(header http.Header, params []Param) {
	for _, p := range params {
		header.Set(HeaderParamPrefix+p.Name, HeaderValue(p.Value))
	}
}
