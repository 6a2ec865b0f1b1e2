package output

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func textResult(t *testing.T, text string, extra map[string]any) json.RawMessage {
	t.Helper()
	r := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	for k, v := range extra {
		r[k] = v
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type decoded struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		Data string `json:"data"`
	} `json:"content"`
	StructuredContent json.RawMessage            `json:"structuredContent"`
	Meta              map[string]json.RawMessage `json:"_meta"`
	IsError           bool                       `json:"isError"`
}

func decode(t *testing.T, raw json.RawMessage) decoded {
	t.Helper()
	var d decoded
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, raw)
	}
	return d
}

func TestTruncateKeepsHeadAndTailWithoutSplittingUTF8(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		max  int
	}{
		{"ascii", strings.Repeat("a", 1000), 100},
		{"two-byte runes", strings.Repeat("é", 500), 101},
		{"three-byte runes", strings.Repeat("€", 500), 100},
		{"four-byte runes", strings.Repeat("𝄞", 300), 103},
		{"mixed", strings.Repeat("a€𝄞é", 200), 97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.s, tc.max)
			if !utf8.ValidString(got) {
				t.Fatalf("truncated text is not valid UTF-8: %q", got)
			}
			head, rest, ok := strings.Cut(got, "\n[… ")
			if !ok {
				t.Fatalf("no marker in %q", got)
			}
			_, tail, _ := strings.Cut(rest, " …]\n")
			if len(head) > tc.max*6/10 || len(head) < tc.max*6/10-3 {
				t.Errorf("head is %d bytes, want about %d", len(head), tc.max*6/10)
			}
			if len(tail) > tc.max-tc.max*6/10 || len(tail) < tc.max-tc.max*6/10-3 {
				t.Errorf("tail is %d bytes, want about %d", len(tail), tc.max-tc.max*6/10)
			}
			if !strings.HasPrefix(tc.s, head) || !strings.HasSuffix(tc.s, tail) {
				t.Errorf("kept parts are not the original's head and tail")
			}
			omitted := len(tc.s) - len(head) - len(tail)
			if !strings.HasPrefix(rest, itoa(omitted)+" bytes omitted") {
				t.Errorf("marker %q does not say %d bytes were omitted", rest[:40], omitted)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestProcessLeavesSmallResultsAlone(t *testing.T) {
	raw := textResult(t, "short", nil)
	out, rep := Process(raw, Options{MaxOutputBytes: 1000, JSONSummaryOver: 1000})
	if &out[0] != &raw[0] {
		t.Error("a small result was copied; it must be forwarded as is")
	}
	if rep.OriginalBytes != int64(len(raw)) || rep.ReturnedBytes != int64(len(raw)) {
		t.Errorf("report %+v, want both sizes %d", rep, len(raw))
	}
}

func TestProcessTruncatesTextOnly(t *testing.T) {
	long := strings.Repeat("ü", 5000)
	structured := map[string]any{"text": long, "n": 1}
	raw, _ := json.Marshal(map[string]any{
		"content": []any{
			map[string]any{"type": "text", "text": long},
			map[string]any{"type": "image", "data": strings.Repeat("A", 9000), "mimeType": "image/png"},
		},
		"structuredContent": structured,
		"_meta":             map[string]any{"other": true},
	})
	out, rep := Process(raw, Options{MaxOutputBytes: 1000})
	d := decode(t, out)
	if !rep.Truncated || rep.Summarized {
		t.Errorf("report %+v, want truncated only", rep)
	}
	if n := len(d.Content[0].Text); n > 1100 {
		t.Errorf("text is %d bytes after truncation to 1000", n)
	}
	if len(d.Content[1].Data) != 9000 {
		t.Error("the image was changed")
	}
	want, _ := json.Marshal(structured)
	if string(d.StructuredContent) != string(want) {
		t.Error("structuredContent was changed")
	}
	var meta Report
	if err := json.Unmarshal(d.Meta[MetaKey], &meta); err != nil {
		t.Fatalf("no %s in _meta: %s", MetaKey, out)
	}
	if meta != rep || meta.ReturnedBytes != int64(len(out)) || meta.OriginalBytes != int64(len(raw)) {
		t.Errorf("_meta says %+v, report %+v, sizes %d→%d", meta, rep, len(raw), len(out))
	}
	if string(d.Meta["other"]) != "true" {
		t.Error("the result's own _meta was lost")
	}
}

func TestProcessSummarizesJSON(t *testing.T) {
	uniform := make([]map[string]any, 500)
	for i := range uniform {
		uniform[i] = map[string]any{"id": i, "title": "issue title"}
	}
	mixed := make([]any, 500)
	for i := range mixed {
		mixed[i] = map[string]any{"id": i}
		if i%2 == 1 {
			mixed[i] = map[string]any{"id": i, "extra": "x"}
		}
	}
	nested := map[string]any{"items": mixed, "name": strings.Repeat("n", 5000), "ok": true}
	enc := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	for _, tc := range []struct {
		name     string
		text     string
		want     []string
		summary  bool
		truncate bool
	}{
		{"uniform objects", enc(uniform), []string{`"count":500`, `"id":0`, `"id":2`}, true, false},
		{"non-uniform objects", enc(mixed), []string{"$: array, 500 items", "$[]: object, 1 keys", "$[].id: number"}, true, false},
		{"nested object", enc(nested), []string{"$: object, 3 keys", "$.items: array, 500 items", "$.name: string, 5000 bytes", "$.ok: boolean"}, true, false},
		{"not JSON", strings.Repeat("plain ", 2000), []string{"bytes omitted"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, rep := Process(textResult(t, tc.text, nil), Options{JSONSummaryOver: 1024, MaxOutputBytes: 4096})
			text := decode(t, out).Content[0].Text
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("summary lacks %q:\n%s", w, text)
				}
			}
			if rep.Summarized != tc.summary || rep.Truncated != tc.truncate {
				t.Errorf("report %+v, want summarized=%v truncated=%v", rep, tc.summary, tc.truncate)
			}
			if strings.Contains(text, `"id":3,`) {
				t.Error("more than 3 items kept")
			}
		})
	}
}

func TestCounters(t *testing.T) {
	var c Counters
	c.Add("a", Report{OriginalBytes: 100, ReturnedBytes: 40})
	c.Add("b", Report{OriginalBytes: 100, ReturnedBytes: 100})
	c.Add("a", Report{OriginalBytes: 100, ReturnedBytes: 60})
	if got := c.Total(); got != (Bytes{300, 200}) {
		t.Errorf("total %+v", got)
	}
	tools := c.Tools()
	if len(tools) != 2 || tools[0] != (ToolBytes{"a", Bytes{200, 100}}) || tools[0].Saving() != 50 {
		t.Errorf("tools %+v", tools)
	}
}

// BenchmarkProcessSmall is the cost the pipeline adds to a typical result
// it leaves alone: a length check and nothing else.
func BenchmarkProcessSmall(b *testing.B) {
	raw := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 2000) + `"}]}`)
	opts := Options{MaxOutputBytes: 64 << 10, JSONSummaryOver: 32 << 10}
	b.ReportAllocs()
	for b.Loop() {
		Process(raw, opts)
	}
}

// BenchmarkProcessTruncate is the cost of cutting a 1 MiB text to 64 KiB.
func BenchmarkProcessTruncate(b *testing.B) {
	raw := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}]}`)
	opts := Options{MaxOutputBytes: 64 << 10}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		Process(raw, opts)
	}
}

// TestProcessRefusesAmbiguousContent: a result over the bound whose
// content, or a text item of it, is given twice or in another case is
// replaced by an error result that says why: JSON parsers read different
// texts of it, so what a model reads could be the copy the bound was not
// applied to. Before, such a result passed unbounded.
func TestProcessRefusesAmbiguousContent(t *testing.T) {
	long := strings.Repeat("x", 5000)
	item := `{"type":"text","text":"` + long + `"}`
	for name, raw := range map[string]string{
		"content twice":        `{"content":[` + item + `],"content":[{"type":"text","text":"short"}]}`,
		"content in two cases": `{"content":[{"type":"text","text":"short"}],"Content":[` + item + `]}`,
		"text twice":           `{"content":[{"type":"text","text":"short","text":"` + long + `"}]}`,
		"type twice":           `{"content":[{"type":"image","type":"text","text":"` + long + `"}]}`,
	} {
		out, rep := Process(json.RawMessage(raw), Options{MaxOutputBytes: 1000})
		d := decode(t, out)
		if !rep.Refused || !d.IsError || len(d.Content) != 1 || !strings.Contains(d.Content[0].Text, "read differently") || len(out) > 1000 {
			t.Errorf("%s: %s (report %+v); want an error result saying why", name, out, rep)
		}
	}
	// An unambiguous result is bounded as before.
	if _, rep := Process(json.RawMessage(`{"content":[`+item+`]}`), Options{MaxOutputBytes: 1000}); rep.Refused || !rep.Truncated {
		t.Errorf("an unambiguous result: report %+v", rep)
	}
}
