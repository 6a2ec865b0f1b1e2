package catalog

import "github.com/mcpgate/mcpgate/internal/mcphttp"

// ParamHeader is a tool parameter that MCP 2026-07-28 mirrors into an
// Mcp-Param-* header (see mcphttp.ParamHeader).
type ParamHeader = mcphttp.ParamHeader

// paramHeaders returns a tool's parameters mirrored into headers.
func paramHeaders(tool []byte) []ParamHeader { return mcphttp.ParamHeaders(tool) }
