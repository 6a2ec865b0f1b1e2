package catalog

import (
	"bytes"
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// ParamHeader is a tool parameter that MCP 2026-07-28 mirrors into an HTTP
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

// paramHeaders returns the x-mcp-header annotations of a tool's
// inputSchema that are statically reachable through "properties" alone,
// the only place 2026-07-28 allows them. It reads nothing unless the
// tool mentions x-mcp-header at all, so tools without it cost nothing.
func paramHeaders(tool json.RawMessage) []ParamHeader {
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
