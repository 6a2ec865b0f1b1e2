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

// acceptsAnswers says in one pass what accepts says of both media types.
func TestAcceptsAnswersAgrees(t *testing.T) {
	for _, accept := range [][]string{
		nil, {"application/json, text/event-stream"}, {"text/html", "application/json;q=0.5"},
		{" application/* "}, {"*/*"}, {"text/*"}, {"application/*x"}, {"text/event-stream"},
		{"text/event-stream;q=1", " application/json "}, {"texts/*, applications/*"},
	} {
		r := &http.Request{Header: http.Header{"Accept": accept}}
		sse, plain := acceptsAnswers(r)
		if wantSSE, wantPlain := accepts(r, "text/event-stream"), accepts(r, "application/json"); sse != wantSSE || plain != wantPlain {
			t.Errorf("acceptsAnswers(%q) = %v, %v; accepts says %v, %v", accept, sse, plain, wantSSE, wantPlain)
		}
	}
}

// TestAcceptsAllocations is the allocation budget of the Accept check made
// per POST: none.
func TestAcceptsAllocations(t *testing.T) {
	r := &http.Request{Header: http.Header{"Accept": {"application/json, text/event-stream"}}}
	if n := testing.AllocsPerRun(100, func() { acceptsAnswers(r); accepts(r, "text/event-stream") }); n != 0 {
		t.Errorf("accepting allocates %v times per request, want 0", n)
	}
}
