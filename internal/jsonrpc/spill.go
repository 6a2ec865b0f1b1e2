package jsonrpc

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// spillChunk is how much of a spilled line moveTo copies before it hands
// the pages it copied back to the kernel.
const spillChunk = 1 << 20

// spillAbove is the size above which a long line leaves the Go heap:
// below it, a mapping's page faults cost more than holding the line twice
// for a moment.
const spillAbove = 2 << 20

// spill holds a line longer than the reader's buffer while it is read: as
// copies of the reader's chunks on the heap up to spillAbove, then in
// anonymous memory outside the Go heap that grows without copying
// (mremap). When the line is complete, moveTo copies it into the one Go
// slice that keeps it, releasing each megabyte of the mapping as soon as
// it is copied: a line of any size is resident about once, not as pieces
// plus their join (twice) or as a slice grown by append (several times).
// Where anonymous mappings are refused, the pieces stay on the heap.
type spill struct {
	mem    []byte   // the mapping, once the line passed spillAbove; len(mem) is its size
	n      int      // bytes of the line so far
	pieces [][]byte // copies of the reader's chunks, while there is no mapping
	noMap  bool     // a mapping was refused: pieces only
}

func (s *spill) append(chunk []byte) {
	if s.mem == nil && (s.noMap || s.n+len(chunk) <= spillAbove || !s.grow(s.n+len(chunk))) {
		s.pieces = append(s.pieces, append([]byte(nil), chunk...))
		s.n += len(chunk)
		return
	}
	if s.pieces != nil { // the line just passed spillAbove: its start joins the mapping
		off := 0
		for _, p := range s.pieces {
			off += copy(s.mem[off:], p)
		}
		s.pieces = nil
	}
	if !s.grow(s.n + len(chunk)) { // grow keeps what the mapping held as a piece
		s.pieces = append(s.pieces, append([]byte(nil), chunk...))
		s.n += len(chunk)
		return
	}
	copy(s.mem[s.n:], chunk)
	s.n += len(chunk)
}

// grow makes the mapping hold at least size bytes, doubling it. When the
// kernel refuses, what the mapping held becomes the first piece and the
// spill keeps pieces from then on.
func (s *spill) grow(size int) bool {
	if size <= len(s.mem) {
		return true
	}
	next := max(2*len(s.mem), 2*spillAbove)
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
		if s.mem != nil {
			s.pieces = [][]byte{append([]byte(nil), s.mem[:s.n]...)}
			unix.Munmap(s.mem)
			s.mem = nil
		}
		s.noMap = true
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

// moveTo returns the line so far in a slice of length room+s.n and
// capacity room+size, its first room bytes zero, and releases the spill.
func (s *spill) moveTo(room, size int) []byte {
	var dst []byte
	if s.mem != nil {
		dst = uninitialized(room + size)[:room]
		clear(dst)
	} else {
		dst = make([]byte, room, room+size)
	}
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

// uninitialized returns n bytes of the Go heap that it did not zero. A
// large allocation in pages the heap used before is zeroed first, which
// writes every page of it: the whole line would be resident before moveTo
// copied a byte of it, beside the mapping that still holds all of it. Only
// strings.Builder.Grow allocates without zeroing; its bytes are taken as
// a slice at once and the string is never read, so nothing sees them
// change. The caller must write every byte before it reads one.
func uninitialized(n int) []byte {
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0) // String of an empty Builder has no bytes to point at
	return unsafe.Slice(unsafe.StringData(b.String()), n)
}
