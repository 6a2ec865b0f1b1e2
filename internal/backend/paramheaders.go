package backend

import (
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
)

// paramIndex is, for one version of a backend's tool list, the tools
// whose parameters 2026-07-28 mirrors into Mcp-Param-* headers.
type paramIndex struct {
	lists  *Lists
	byTool map[string][]mcphttp.ParamHeader // nil when no tool has any
}

// mirroredParams returns the Mcp-Param-* headers a tools/call to a
// remote 2026-07-28 server carries, as its clients must send them: the
// tool's annotated arguments (see mcphttp.MirroredParams), from the tool
// list the backend last read. The index of annotated tools is built once
// per list.
func (r *remote) mirroredParams(msg *jsonrpc.Message) []mcphttp.Param {
	if msg.Method != "tools/call" {
		return nil
	}
	lists := r.c.b.Lists()
	if lists == nil {
		return nil
	}
	idx := r.params.Load()
	if idx == nil || idx.lists != lists {
		idx = &paramIndex{lists: lists}
		for _, tool := range lists.Tools {
			if annotated := mcphttp.ParamHeaders(tool); annotated != nil {
				raw, _, _ := jsonrpc.Lookup(tool, "name")
				if name, ok := jsonrpc.StringValue(raw); ok {
					if idx.byTool == nil {
						idx.byTool = map[string][]mcphttp.ParamHeader{}
					}
					idx.byTool[name] = annotated
				}
			}
		}
		r.params.Store(idx)
	}
	if idx.byTool == nil {
		return nil
	}
	raw, _, _ := jsonrpc.Lookup(msg.Params, "name")
	name, _ := jsonrpc.StringValue(raw)
	return mcphttp.MirroredParams(msg.Params, idx.byTool[name])
}
