package backend

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpgate/mcpgate/internal/journal"
)

// memoryCheckInterval is how often the memory use of a server with a
// memory_max is compared with it.
const memoryCheckInterval = 5 * time.Second

// memoryWatch warns once when a server's memory use passes 80% of its
// memory_max, and again only after it fell below.
type memoryWatch struct {
	limit  uint64 // memory_max in bytes
	warned bool
}

// newMemoryWatch returns the watch of the backend's memory_max, or nil
// when it has none.
func (b *Backend) newMemoryWatch() *memoryWatch {
	if !b.cfg.MemoryMax.IsSet() {
		return nil
	}
	var info unix.Sysinfo_t
	total := uint64(math.MaxUint64)
	if unix.Sysinfo(&info) == nil {
		total = info.Totalram * uint64(info.Unit)
	}
	limit := b.cfg.MemoryMax.Scale(total)
	if limit == math.MaxUint64 {
		return nil
	}
	return &memoryWatch{limit: limit}
}

// observe reports whether current, the use now, is worth a warning.
func (m *memoryWatch) observe(current uint64) bool {
	if current == math.MaxUint64 { // nothing accounts for it
		return false
	}
	high := current > m.limit/5*4
	warn := high && !m.warned
	m.warned = high
	return warn
}

// checkMemory reads the server's memory use and warns once it is high.
func (b *Backend) checkMemory(m *memoryWatch, conn *Conn) {
	u := conn.proc.usage()
	if !m.observe(u.MemoryCurrent) {
		return
	}
	b.log.Warn(fmt.Sprintf("backend %q uses %d bytes, more than 80%% of its memory_max (%d bytes); beyond it the kernel kills it", b.name, u.MemoryCurrent, m.limit),
		conn.ident(), "memory_current", u.MemoryCurrent, "memory_max", m.limit, journal.MessageMemoryHigh.Attr())
}
