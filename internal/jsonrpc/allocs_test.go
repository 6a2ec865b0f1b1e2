package jsonrpc

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// Allocation budgets of the functions every call goes through, at the
// numbers they reach: a change that allocates more fails here, one that
// allocates less should lower its budget.
func TestHotPathAllocationBudgets(t *testing.T) {
	request := []byte(`{"jsonrpc":"2.0","id":"client-7","method":"tools/call","params":{"name":"gh__search","arguments":{"q":"` + strings.Repeat("z", 1024) + `"},"_meta":{"progressToken":"p1"}}}`)
	response := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` + strings.Repeat("z", 1024) + `"}]}}`)
	msg, err := Parse(request)
	if err != nil {
		t.Fatal(err)
	}
	_, nameSpan, _ := Lookup(msg.Params, "name")
	keys := []string{"name", "arguments", "_meta"}
	values := make([]json.RawMessage, len(keys))
	buf := make([]byte, 0, 4096)
	id := IntID(12345)
	lines := bytes.Repeat(append(response, '\n'), 1000)
	lr := NewLineReader(bytes.NewReader(lines), 1<<20)
	tests := []struct {
		name   string
		budget float64
		fn     func()
	}{
		{"ParseHead", 0, func() { ParseHead(response[:40]) }},
		{"Parse request", 1, func() { Parse(request) }},
		{"Parse response", 1, func() { Parse(response) }},
		{"Lookup", 0, func() { Lookup(msg.Params, "name") }},
		{"LookupPath", 0, func() { LookupPath(msg.Params, "_meta", "progressToken") }},
		{"FindEach", 0, func() { FindEach(msg.Params, keys, values) }},
		{"Replace", 1, func() { Replace(msg.Params, nameSpan, []byte(`"search"`)) }},
		{"Compact", 0, func() { Compact(msg.Params) }},
		{"OneLine", 0, func() { OneLine(response) }},
		{"AppendRequest", 0, func() { AppendRequest(buf[:0], id, msg.Method, msg.Params) }},
		{"LineReader.Next", 1, func() { lr.Next() }},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(100, tt.fn)
		if got > tt.budget {
			t.Errorf("%s allocates %.1f times, over its budget of %.0f", tt.name, got, tt.budget)
		} else if got < tt.budget {
			t.Logf("%s allocates %.1f times, under its budget of %.0f: lower the budget", tt.name, got, tt.budget)
		}
	}
}

// A line longer than spillAbove is allocated once, at its size (plus the
// room asked for), and its first spillAbove bytes: the rest is kept
// outside the Go heap while it is read (it used to be kept on it in
// pieces, then joined: twice the line).
func TestLongLineAllocatedOnce(t *testing.T) {
	line := append([]byte(`{"jsonrpc":"2.0","id":1,"result":"`), bytes.Repeat([]byte("0123456789abcdef"), 1<<20)...)
	line = append(line, `"}`...)
	lr := NewLineReader(bytes.NewReader(append(line, '\n')), 64<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	buf, err := lr.NextRoom(SpliceRoom)
	runtime.ReadMemStats(&after)
	if err != nil || !bytes.Equal(buf[SpliceRoom:], line) {
		t.Fatalf("NextRoom = %d bytes, %v; want the line of %d", len(buf), err, len(line))
	}
	// Its first spillAbove bytes are copied on the heap before it leaves it.
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > uint64(len(line))+spillAbove+uint64(len(line))/16 {
		t.Errorf("reading a line of %d bytes allocated %d bytes", len(line), allocated)
	}
}

// A long line is resident about once while it moves from its mapping onto
// the heap, also when its slice starts in heap pages that held garbage:
// the heap zeroes such a slice before it hands it out, which wrote every
// page of it, so that it was all resident beside the mapping that still
// held the line. One large result of every few came out at twice its size
// that way: a collection while it was read freed the copies of its start
// that had been kept on the heap, at the heap's top.
func TestLongLineResidentOnce(t *testing.T) {
	const size = 32 << 20
	head, tail := `{"jsonrpc":"2.0","id":1,"result":"`, "\"}\n"
	if raceEnabled {
		t.Skip("the race detector's shadow of the line counts in the resident size; make test runs this without it")
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident size: %v", err)
	}
	// Whether the slice lands on the garbage depends on where the heap
	// put it: of four lines, nearly always one does.
	for range 4 {
		body := &collectingZeros{left: size, collectAt: size - 4*spillAbove}
		lr := NewLineReader(io.MultiReader(strings.NewReader(head), body, strings.NewReader(tail)), 64<<20)
		debug.FreeOSMemory() // the last line's pages go back, as on a fresh heap
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		before := procStatusKiB(t, "VmRSS")
		buf, err := lr.NextRoom(SpliceRoom)
		peak := procStatusKiB(t, "VmHWM")
		line := buf[SpliceRoom:]
		if err != nil || len(line) != len(head)+size+len(tail)-1 || string(line[:len(head)]) != head ||
			strings.Count(string(line[len(head):len(head)+size]), "0") != size {
			t.Fatalf("NextRoom = %d bytes, %v; want the line of %d", len(line), err, len(head)+size+len(tail)-1)
		}
		if grew := (peak - before) << 10; grew > size*3/2 {
			t.Errorf("reading a line of %d MiB raised the peak resident size by %d MiB, want at most 1.5 times the line", size>>20, grew>>20)
		}
	}
}

// collectingZeros reads as left bytes of '0', and runs a collection once
// it has collectAt bytes left.
type collectingZeros struct{ left, collectAt int }

func (z *collectingZeros) Read(p []byte) (int, error) {
	if z.left == 0 {
		return 0, io.EOF
	}
	if z.left <= z.collectAt {
		runtime.GC()
		z.collectAt = -1
	}
	p = p[:min(len(p), z.left)]
	for i := range p {
		p[i] = '0'
	}
	z.left -= len(p)
	return len(p), nil
}

// procStatusKiB returns a field of /proc/self/status in KiB.
func procStatusKiB(t *testing.T, field string) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for l := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("%s: %q", field, l)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
