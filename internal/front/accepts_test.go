package front

import (
	"net/http"
	"testing"
)

func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"application/json, text/event-stream"}, true},
		{[]string{"text/html", "application/json;q=0.5"}, true},
		{[]string{" application/* "}, true},
		{[]string{"*/*"}, true},
		{[]string{"application/*x"}, false},
		{[]string{"applications/*"}, false},
		{[]string{"text/event-stream"}, false},
	} {
		r := &http.Request{Header: http.Header{"Accept": tc.accept}}
		if got := accepts(r, "application/json"); got != tc.want {
			t.Errorf("accepts(%q, application/json) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}

// TestAcceptsAllocations is the allocation budget of the Accept check made
// twice per POST: none.
func TestAcceptsAllocations(t *testing.T) {
	r := &http.Request{Header: http.Header{"Accept": {"application/json, text/event-stream"}}}
	if n := testing.AllocsPerRun(100, func() { accepts(r, "application/json"); accepts(r, "text/event-stream") }); n != 0 {
		t.Errorf("accepts allocates %v times per request, want 0", n)
	}
}
