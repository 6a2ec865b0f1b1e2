package output

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Bytes counts what went into the pipeline and what came out.
type Bytes struct {
	Processed, Returned uint64
}

// Saving is the share of processed bytes the pipeline removed, in percent.
func (b Bytes) Saving() float64 {
	if b.Processed == 0 || b.Returned >= b.Processed {
		return 0
	}
	return 100 * float64(b.Processed-b.Returned) / float64(b.Processed)
}

// Counters count the bytes of one backend's tools/call results, in total
// and per tool. They are safe for concurrent use; the number of tools
// counted is bounded by the catalog.
type Counters struct {
	processed, returned atomic.Uint64
	tools               sync.Map // tool name → *toolCount
}

type toolCount struct{ processed, returned atomic.Uint64 }

// Add counts one result of tool.
func (c *Counters) Add(tool string, rep Report) {
	c.processed.Add(uint64(rep.OriginalBytes))
	c.returned.Add(uint64(rep.ReturnedBytes))
	v, ok := c.tools.Load(tool)
	if !ok {
		v, _ = c.tools.LoadOrStore(tool, &toolCount{})
	}
	t := v.(*toolCount)
	t.processed.Add(uint64(rep.OriginalBytes))
	t.returned.Add(uint64(rep.ReturnedBytes))
}

// Total returns the backend's totals.
func (c *Counters) Total() Bytes {
	return Bytes{Processed: c.processed.Load(), Returned: c.returned.Load()}
}

// ToolBytes is one tool's counts.
type ToolBytes struct {
	Tool string
	Bytes
}

// Tools returns the counts of every tool called so far, sorted by name.
func (c *Counters) Tools() []ToolBytes {
	m := map[string]Bytes{}
	c.tools.Range(func(k, v any) bool {
		t := v.(*toolCount)
		m[k.(string)] = Bytes{Processed: t.processed.Load(), Returned: t.returned.Load()}
		return true
	})
	out := make([]ToolBytes, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, ToolBytes{Tool: k, Bytes: m[k]})
	}
	return out
}
