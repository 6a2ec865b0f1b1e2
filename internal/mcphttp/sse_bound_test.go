package mcphttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// endless is a stream that does not end: an event whose data lines come
// on and no blank line ever ends it. It counts what was read, and ends
// after limit bytes so that a reader without a bound fails rather than
// hangs.
type endless struct {
	line  []byte
	read  int
	limit int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.limit {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) {
		n += copy(p[n:], e.line[(e.read+n)%len(e.line):])
	}
	e.read += n
	return n, nil
}

// An event whose data exceeds the bound is an *EventTooLargeError as soon
// as the bound is passed, however the server shapes it (many lines, one
// line longer than a chunk, an event that never ends), and the reader
// holds no more than the bound: the events after it are read as usual.
func TestEventReaderBoundsEvents(t *testing.T) {
	const max = 100 << 10
	big := strings.Repeat("x", 3*max)
	next := "data: {\"after\":1}\n\n"
	for _, tc := range []struct {
		name   string
		stream string
		head   string
		after  bool // the event after the large one is read
	}{
		{"many lines", strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 3*max/1000) + "\n" + next, "yyyy", true},
		{"one long line", "data: {\"id\":7,\"result\":\"" + big + "\"}\n\n" + next, `{"id":7,"result":"xxx`, true},
		{"one long line with CR endings", "data: " + big + "\r\r" + next, "xxx", true},
		{"long line after short ones", "data: a\ndata: b\ndata: " + big + "\n\n" + next, "a\nb\nxxx", true},
		{"never ends", "data: " + big, "xxx", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := NewEventReader(strings.NewReader(tc.stream), max)
			_, err := es.Message()
			var tl *EventTooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("Message = %v, want an EventTooLargeError", err)
			}
			if tl.Max != max || !strings.HasPrefix(string(tl.Head), tc.head) || len(tl.Head) > headBytes {
				t.Errorf("error = %+v with head %.40q, want max %d and a head of at most %d bytes starting %q", tl, tl.Head, max, headBytes, tc.head)
			}
			if !strings.Contains(err.Error(), "more than 102400 bytes") {
				t.Errorf("error %q does not say the limit", err)
			}
			data, err := es.Message()
			switch {
			case tc.after && (err != nil || string(data) != `{"after":1}`):
				t.Errorf("after the large event: %q, %v; want the next event", data, err)
			case !tc.after && err != io.EOF:
				t.Errorf("after the unfinished event: %q, %v; want io.EOF", data, err)
			}
		})
	}
}

// An event that never ends, its data trickling forever, fails once it
// passes the bound: the reader has not read much more than that.
func TestEventReaderEndlessEvent(t *testing.T) {
	const max = 1 << 20
	for _, line := range []string{"data: 0123456789abcdef\n", "data: " + strings.Repeat("z", 200<<10) + "\n"} {
		src := &endless{line: []byte(line), limit: 64 * max}
		_, err := NewEventReader(src, max).Message()
		var tl *EventTooLargeError
		if !errors.As(err, &tl) {
			t.Fatalf("Message = %v, want an EventTooLargeError", err)
		}
		// The "data: " of each line is read but not kept: the reader
		// stops after about max bytes of data, far from the limit.
		if src.read > 2*max+len(line)+2*chunkBytes {
			t.Errorf("read %d bytes of an endless event before giving up; the bound is %d", src.read, max)
		}
	}
}

// Lines of any length but within the bound are read whole, in chunks: an
// event of exactly max bytes passes, one more byte does not.
func TestEventReaderLongLinesWithinBound(t *testing.T) {
	const max = 5*chunkBytes + 17
	exact := strings.Repeat("a", max)
	for _, ending := range []string{"\n", "\r\n", "\r"} {
		stream := "id: 1" + ending + "data: " + exact + ending + ending + "data: " + exact + "b" + ending + ending + "data: ok" + ending + ending
		es := NewEventReader(strings.NewReader(stream), max)
		data, err := es.Message()
		if err != nil || string(data) != exact {
			t.Fatalf("ending %q: first event %d bytes, %v; want %d bytes", ending, len(data), err, max)
		}
		var tl *EventTooLargeError
		if _, err := es.Message(); !errors.As(err, &tl) {
			t.Errorf("ending %q: second event: %v, want too large", ending, err)
		}
		if data, err := es.Message(); err != nil || string(data) != "ok" {
			t.Errorf("ending %q: third event %q, %v", ending, data, err)
		}
		if es.LastID != "1" {
			t.Errorf("last id %q", es.LastID)
		}
	}
}

// refEvents reads a whole stream the simple way, everything in memory,
// as the specification describes it: the events a bounded reader must
// agree with. An event of more than max bytes is "TOO LARGE", also when
// the stream ends inside it. An event line that does not fit in a chunk
// (with its CR, which may start a CR LF) sets no type.
func refEvents(stream []byte, max, chunk int) []string {
	var out []string
	var data []byte
	seen, hasData := false, false
	typ := ""
	emit := func() {
		switch {
		case len(data) > max:
			out = append(out, "TOO LARGE")
		case typ == "" || typ == "message":
			if len(bytes.TrimSpace(data)) > 0 {
				out = append(out, string(data))
			}
		}
		data, seen, hasData, typ = nil, false, false, ""
	}
	s := stream
	for len(s) > 0 {
		i := bytes.IndexAny(s, "\r\n")
		if i < 0 {
			// The last line, unended: it counts, but its event is unfinished.
			if f, v, _ := bytes.Cut(s, []byte(":")); string(f) == "data" && len(s) > 0 && s[0] != ':' {
				if hasData {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			}
			break
		}
		line := s[:i]
		long := i >= chunk || (i == chunk-1 && s[i] == '\r')
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			s = s[i+2:]
		} else {
			s = s[i+1:]
		}
		switch {
		case len(line) == 0:
			if seen {
				emit()
			}
		case line[0] == ':':
		default:
			seen = true
			f, v, _ := bytes.Cut(line, []byte(":"))
			v = bytes.TrimPrefix(v, []byte(" "))
			switch string(f) {
			case "data":
				if hasData {
					data = append(data, '\n')
				}
				data = append(data, v...)
				hasData = true
			case "event":
				if !long {
					typ = string(v)
				}
			}
		}
	}
	if len(data) > max {
		out = append(out, "TOO LARGE")
	}
	return out
}

// FuzzEventReader checks the bounded reader against refEvents: the same
// messages, in order, an event too large in the same places, never more
// than max bytes of data, and no panic on any input.
func FuzzEventReader(f *testing.F) {
	for _, seed := range []string{
		"data: {\"a\":1}\n\n",
		"id: 0-0\nretry: 1500\ndata: \n\nevent: message\nid: 0-1\ndata: {\"a\":1}\n\n",
		"data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\rdata:{\"c\":3}\n\n",
		"data: {\"a\":\ndata:  [1,\ndata: 2]}\n\n",
		": keep-alive\n\nevent: ping\ndata: {}\n\nfoo: bar\ndata: {\"x\":\"y\"}\n\n",
		"data: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n\ndata: b\n\n",
		"data: a\ndata: b\ndata: c\ndata: d\ndata: e\ndata: f\ndata: g\ndata: h\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"}}\n\n",
		"data: never ends data: never ends",
		"data: \xff\xfe\x00\r\r\n\n",
	} {
		f.Add([]byte(seed), uint16(16), uint8(8), uint8(0))
	}
	f.Add([]byte("event: ping\rdata: x\n\n"), uint16(100), uint8(9), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, bound uint16, chunkSize, repeat uint8) {
		stream := bytes.Repeat(data, int(repeat)+1)
		max := 1 + int(bound)%(4*chunkBytes)
		chunk := 8 + int(chunkSize)
		want := refEvents(stream, max, chunk)
		es := newEventReader(bytes.NewReader(stream), max, chunk)
		var got []string
		for i := 0; ; i++ {
			if i > len(stream)+1 {
				t.Fatalf("more events than bytes: %q", got)
			}
			data, err := es.Message()
			var tl *EventTooLargeError
			if errors.As(err, &tl) {
				if len(tl.Head) > headBytes {
					t.Fatalf("head of %d bytes", len(tl.Head))
				}
				got = append(got, "TOO LARGE")
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Message: %v", err)
			}
			if len(data) > max {
				t.Fatalf("an event of %d bytes passed the bound %d", len(data), max)
			}
			got = append(got, string(data))
		}
		if strings.Join(got, "\x00|") != strings.Join(want, "\x00|") {
			t.Errorf("max %d: reader gave %q, the specification %q", max, got, want)
		}
	})
}

// An answer to a POST over the bound, as a JSON body or as an event, is
// an *EventTooLargeError that names the server; its request is missing.
func TestReadAnswerBoundsMessages(t *testing.T) {
	const max = 100 // less than headBytes: the head is what there is
	big := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 2*max) + `"}`
	for _, tc := range []struct{ media, body string }{
		{MediaJSON, big},
		{MediaSSE, "data: " + big + "\n\n"},
		{MediaSSE, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata: " + strings.Repeat("x", 2*max) + "\n\n"},
	} {
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {tc.media}}, Body: io.NopCloser(strings.NewReader(tc.body))}
		missing, err := ReadAnswer(resp, []json.RawMessage{json.RawMessage("1")}, max, `backend "r"`, func(m []byte) { t.Errorf("delivered %q", m) })
		var tl *EventTooLargeError
		if !errors.As(err, &tl) || len(missing) != 1 || !strings.HasPrefix(err.Error(), `backend "r" sent a message of more than 100 bytes`) {
			t.Errorf("%s answer: missing %s, %v; want 1 missing and an EventTooLargeError naming the server", tc.media, missing, err)
		}
	}
}
