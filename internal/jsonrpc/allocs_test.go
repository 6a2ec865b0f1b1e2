package jsonrpc

import (
	"bytes"
	"encoding/json"
	"runtime"
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
