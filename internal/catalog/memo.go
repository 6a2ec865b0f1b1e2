package catalog

import (
	"sync"
	"sync/atomic"
)

// maxMemos bounds the keys a catalog remembers decisions for; decisions
// for further keys are made every time.
const maxMemos = 1024

// memos are decisions about a catalog's tools remembered for the life of
// the snapshot, by key (a client's policy, say): a call decides in O(1)
// what it would otherwise work out from the rules every time.
type memos struct {
	m sync.Map // key → []atomic.Uint32, by tool index: 0 not decided, 1 no, 2 yes
	n atomic.Int32
}

// DecideTool returns decide(name) for the tool exposed as name, computing
// it once per key and snapshot. decide must depend only on key and name.
// A name the catalog does not have is decided every time.
func (c *Catalog) DecideTool(key any, name string, decide func(name string) bool) bool {
	i, ok := c.tools[name]
	if !ok || c.memo == nil {
		return decide(name)
	}
	v, ok := c.memo.m.Load(key)
	if !ok {
		if c.memo.n.Add(1) > maxMemos {
			c.memo.n.Add(-1)
			return decide(name)
		}
		var loaded bool
		if v, loaded = c.memo.m.LoadOrStore(key, make([]atomic.Uint32, len(c.Tools))); loaded {
			c.memo.n.Add(-1)
		}
	}
	d := &v.([]atomic.Uint32)[i]
	switch d.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	yes := decide(name)
	if yes {
		d.Store(2)
	} else {
		d.Store(1)
	}
	return yes
}
