package jsonrpc

import "golang.org/x/sys/unix"

// spillChunk is how much of a spilled line moveTo copies before it hands
// the pages it copied back to the kernel.
const spillChunk = 1 << 20

// spill holds a line longer than the reader's buffer while it is read, in
// anonymous memory outside the Go heap that grows without copying
// (mremap). When the line is complete, moveTo copies it into the one Go
// slice that keeps it, releasing each megabyte as soon as it is copied: a
// line of any size is resident about once, not as pieces plus their join
// (twice) or as a slice grown by append (several times). Where anonymous
// mappings are refused, the pieces are kept on the heap instead.
type spill struct {
	mem    []byte   // the mapping; len(mem) is its size
	n      int      // bytes of the line in mem
	pieces [][]byte // the fallback: copies of the reader's chunks
}

func (s *spill) append(chunk []byte) {
	if s.pieces == nil && s.grow(s.n+len(chunk)) {
		s.n += copy(s.mem[s.n:], chunk)
		return
	}
	s.pieces = append(s.pieces, append([]byte(nil), chunk...))
	s.n += len(chunk)
}

// grow makes the mapping hold at least size bytes, doubling it.
func (s *spill) grow(size int) bool {
	if size <= len(s.mem) {
		return true
	}
	next := max(2*len(s.mem), 4*spillChunk)
	for next < size {
		next *= 2
	}
	var mem []byte
	var err error
	if s.mem == nil {
		mem, err = unix.Mmap(-1, 0, next, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	} else {
		mem, err = unix.Mremap(s.mem, next, unix.MREMAP_MAYMOVE)
	}
	if err != nil {
		n := s.n
		if n > 0 { // keep what the mapping holds as the first piece
			s.pieces = [][]byte{append([]byte(nil), s.mem[:n]...)}
		}
		s.free()
		s.n = n
		return false
	}
	s.mem = mem
	return true
}

// head returns the first headLen bytes of the line so far, then of last.
func (s *spill) head(last []byte) []byte {
	if s == nil {
		return joinHead(nil, last)
	}
	if s.pieces != nil {
		return joinHead(s.pieces, last)
	}
	return joinHead([][]byte{s.mem[:s.n]}, last)
}

// moveTo appends the line to dst, which must have room for it, and
// releases the spill.
func (s *spill) moveTo(dst []byte) []byte {
	for _, p := range s.pieces {
		dst = append(dst, p...)
	}
	for off := 0; off < s.n && s.pieces == nil; off += spillChunk {
		end := min(off+spillChunk, s.n)
		dst = append(dst, s.mem[off:end]...)
		unix.Madvise(s.mem[off:end], unix.MADV_DONTNEED)
	}
	s.free()
	return dst
}

// free unmaps the spill's memory.
func (s *spill) free() {
	if s == nil {
		return
	}
	if s.mem != nil {
		unix.Munmap(s.mem)
	}
	s.mem, s.n = nil, 0
}
