package daemon

import (
	"strings"
	"testing"
)

// TestExcerpt: a message body in a debug entry is cut, and says how long
// it was.
func TestExcerpt(t *testing.T) {
	tests := []struct {
		body string
		want string
	}{
		{"", ""},
		{`{"level":"info"}`, `{"level":"info"}`},
		{strings.Repeat("x", maxExcerpt), strings.Repeat("x", maxExcerpt)},
		{strings.Repeat("y", 10000), strings.Repeat("y", maxExcerpt) + "… (10000 bytes)"},
	}
	for _, tc := range tests {
		if got := excerpt([]byte(tc.body)); got != tc.want {
			t.Errorf("excerpt of %d bytes = %q…, want %q…", len(tc.body), got[:min(len(got), 20)], tc.want[:min(len(tc.want), 20)])
		}
	}
}
