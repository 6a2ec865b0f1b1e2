package mcphttp

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEventReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []string
		lastID string
		retry  time.Duration
	}{
		{"lf", "id: 0-0\nretry: 1500\ndata: \n\nevent: message\nid: 0-1\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}, "0-1", 1500 * time.Millisecond},
		{"crlf and cr", "data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\rdata:{\"c\":3}\n\n", []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, "", 0},
		{"multi-line data", "data: {\"a\":\ndata:  [1,\ndata: 2]}\n\n", []string{"{\"a\":\n [1,\n2]}"}, "", 0},
		{"comments, other events, unknown fields", ": keep-alive\n\nevent: ping\ndata: {}\n\nfoo: bar\ndata: {\"x\":\"y\"}\n\n", []string{`{"x":"y"}`}, "", 0},
		{"unfinished event at the end", "data: {\"a\":1}\n\ndata: {\"b\"", []string{`{"a":1}`}, "", 0},
		{"id with NUL ignored", "id: 1\n\nid: a\x00b\ndata: {}\n\n", []string{`{}`}, "1", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := NewEventReader(strings.NewReader(tc.stream), 1<<20)
			var got []string
			for {
				data, err := es.Message()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(data))
			}
			if !slices.Equal(got, tc.want) || es.LastID != tc.lastID || es.Retry != tc.retry {
				t.Errorf("got %q, last id %q, retry %v; want %q, %q, %v", got, es.LastID, es.Retry, tc.want, tc.lastID, tc.retry)
			}
		})
	}
}
