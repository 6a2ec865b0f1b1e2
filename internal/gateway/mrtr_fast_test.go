package gateway

import (
	"encoding/json"
	"testing"
)

// TestIsInputRequired covers the search that skips the scan of a result
// without the value anywhere: it must answer as the scan does.
func TestIsInputRequired(t *testing.T) {
	for _, tc := range []struct {
		result string
		want   bool
	}{
		{`{"resultType":"input_required","inputRequests":{}}`, true},
		{`{"content":[{"type":"text","text":"x"}],"resultType":"input_required"}`, true},
		{`{"content":[{"type":"text","text":"\"input_required\""}]}`, false},
		{`{"content":[],"resultType":"complete"}`, false},
		{`{"resultType":"input\u005frequired"}`, false},
		{`{"meta":{"resultType":"input_required"}}`, false},
		{`{"content":[{"type":"text","text":"hello"}]}`, false},
	} {
		if got := isInputRequired(json.RawMessage(tc.result)); got != tc.want {
			t.Errorf("isInputRequired(%s) = %v, want %v", tc.result, got, tc.want)
		}
	}
}
