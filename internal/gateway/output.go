package gateway

import (
	"encoding/json"
	"sync"

	"github.com/mcpgate/mcpgate/internal/output"
)

// outputCounters returns the counters of a backend, creating them.
func (g *Gateway) outputCounters(name string) *output.Counters {
	v, ok := g.outputs.Load(name)
	if !ok {
		v, _ = g.outputs.LoadOrStore(name, &output.Counters{})
	}
	return v.(*output.Counters)
}

// OutputBytes returns how many bytes of a backend's tools/call results went
// through the output pipeline and how many came out, in total and by tool
// (its name at the backend).
func (g *Gateway) OutputBytes(name string) (output.Bytes, []output.ToolBytes) {
	v, ok := g.outputs.Load(name)
	if !ok {
		return output.Bytes{}, nil
	}
	c := v.(*output.Counters)
	return c.Total(), c.Tools()
}

// ForgetOutputBytes drops a removed backend's counters.
func (g *Gateway) ForgetOutputBytes(name string) { g.outputs.Delete(name) }

// processOutput runs a tools/call result of tool (its name at backend)
// through the output pipeline and counts it. A result it does not change
// is returned as is, without being re-encoded.
func (g *Gateway) processOutput(backend, tool string, result json.RawMessage) json.RawMessage {
	var opts output.Options
	if s := g.settings.Load(); s != nil {
		if bc := s.backends[backend]; bc != nil {
			o := bc.ToolOutput(tool)
			opts = output.Options{MaxOutputBytes: o.MaxOutputBytes, JSONSummaryOver: o.JSONSummaryOver}
		}
	}
	out, rep := output.Process(result, opts)
	g.outputCounters(backend).Add(tool, rep)
	return out
}

// outputState is the gateway's output bookkeeping: counters by backend.
type outputState struct {
	outputs sync.Map // backend name → *output.Counters
}
