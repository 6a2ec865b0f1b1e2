package gateway

import (
	"encoding/json"
	"testing"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/config"
)

func TestServedByGoesIntoMeta(t *testing.T) {
	primary := backend.New(&config.Backend{Name: "a"}, backend.Options{})
	second := backend.New(&config.Backend{Name: "b"}, backend.Options{})
	tests := []struct{ in, want string }{
		{`{"content":[]}`, `{"_meta":{"io.mcpgate/servedBy":"b"},"content":[]}`},
		{`{}`, `{"_meta":{"io.mcpgate/servedBy":"b"}}`},
		{`{ }`, `{"_meta":{"io.mcpgate/servedBy":"b"}}`},
		{`{"_meta":{"x":1},"content":[]}`, `{"_meta":{"io.mcpgate/servedBy":"b","x":1},"content":[]}`},
		{`{"_meta":{ },"content":[]}`, `{"_meta":{"io.mcpgate/servedBy":"b"},"content":[]}`},
	}
	for _, tt := range tests {
		c := &call{b: second, fb: &fallback{primary: primary}}
		got := c.servedBy(json.RawMessage(tt.in))
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Errorf("servedBy(%s) = %s: invalid JSON: %v", tt.in, got, err)
			continue
		}
		json.Unmarshal([]byte(tt.want), &b)
		if ja, jb := mustJSON(a), mustJSON(b); ja != jb {
			t.Errorf("servedBy(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	// The primary's own answers stay untouched.
	c := &call{b: primary, fb: &fallback{primary: primary}}
	if got := string(c.servedBy(json.RawMessage(`{"content":[]}`))); got != `{"content":[]}` {
		t.Errorf("the primary's answer was changed: %s", got)
	}
}

func mustJSON(v any) string {
	out, _ := json.Marshal(v)
	return string(out)
}
