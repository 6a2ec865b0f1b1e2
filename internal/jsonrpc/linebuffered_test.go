package jsonrpc

import (
	"io"
	"strings"
	"testing"
)

// LineBuffered tells whether the next line can be returned without
// reading more.
func TestLineBuffered(t *testing.T) {
	lr := NewLineReader(io.MultiReader(strings.NewReader("one\ntwo\nthr"), strings.NewReader("ee\n")), 1<<10)
	if lr.LineBuffered() {
		t.Fatal("a line is buffered before anything was read")
	}
	for _, want := range []struct {
		line     string
		buffered bool
	}{{"one", true}, {"two", false}, {"three", false}} {
		line, err := lr.Next()
		if err != nil || string(line) != want.line {
			t.Fatalf("Next = %q, %v; want %q", line, err, want.line)
		}
		if got := lr.LineBuffered(); got != want.buffered {
			t.Errorf("after %q: LineBuffered = %v, want %v", want.line, got, want.buffered)
		}
	}
}
