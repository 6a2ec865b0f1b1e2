// Package output shrinks tools/call results before a model sees them: it summarises large JSON text and truncates long text.
package output

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// MetaKey is the _meta member a changed result carries.
const MetaKey = "io.mcpgate/output"

// Options say what the pipeline does to one tool's results. Zero values
// turn a step off.
type Options struct {
	// MaxOutputBytes cuts each text content item longer than this, keeping
	// its first 60% and last 40% around a marker.
	MaxOutputBytes int64
	// JSONSummaryOver replaces a text item that parses as JSON and is
	// longer than this with a summary. It runs before truncation.
	JSONSummaryOver int64
}

// Off reports whether o changes nothing.
func (o Options) Off() bool { return o.MaxOutputBytes <= 0 && o.JSONSummaryOver <= 0 }

// threshold is the shortest text the pipeline might change.
func (o Options) threshold() int64 {
	switch {
	case o.MaxOutputBytes <= 0:
		return o.JSONSummaryOver
	case o.JSONSummaryOver <= 0:
		return o.MaxOutputBytes
	}
	return min(o.MaxOutputBytes, o.JSONSummaryOver)
}

// Report is what Process did to one result.
type Report struct {
	OriginalBytes int64 `json:"originalBytes"`
	ReturnedBytes int64 `json:"returnedBytes"`
	Summarized    bool  `json:"summarized"`
	Truncated     bool  `json:"truncated"`
}

// Process applies o to the raw result of a tools/call. It returns result
// itself, not re-encoded, when nothing needs changing; the check is the
// length of result first, so small results cost nothing. A changed result
// carries _meta["io.mcpgate/output"] with the Report. structuredContent,
// images, audio and every member it does not change keep their bytes.
func Process(result json.RawMessage, o Options) (json.RawMessage, Report) {
	rep := Report{OriginalBytes: int64(len(result)), ReturnedBytes: int64(len(result))}
	// A JSON string's encoding is never shorter than its text, so a result
	// no longer than the threshold holds no text longer than it.
	if o.Off() || int64(len(result)) <= o.threshold() {
		return result, rep
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(result, &top) != nil {
		return result, rep
	}
	var content []json.RawMessage
	if json.Unmarshal(top["content"], &content) != nil {
		return result, rep
	}
	changed := false
	for i, item := range content {
		if int64(len(item)) <= o.threshold() {
			continue
		}
		if out, ok := processItem(item, o, &rep); ok {
			content[i] = out
			changed = true
		}
	}
	if !changed {
		return result, rep
	}
	top["content"] = mustMarshal(content)
	// The report's ReturnedBytes depends on the final size, which depends
	// on the report: marshal twice, the second time with the measured size.
	top["_meta"] = withMeta(top["_meta"], rep)
	out := mustMarshal(top)
	rep.ReturnedBytes = int64(len(out))
	top["_meta"] = withMeta(top["_meta"], rep)
	out = mustMarshal(top)
	rep.ReturnedBytes = int64(len(out))
	return out, rep
}

// processItem summarises and truncates one text content item.
func processItem(item json.RawMessage, o Options, rep *Report) (json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(item, &fields) != nil || string(fields["type"]) != `"text"` {
		return nil, false
	}
	var text string
	if json.Unmarshal(fields["text"], &text) != nil {
		return nil, false
	}
	changed := false
	if o.JSONSummaryOver > 0 && int64(len(text)) > o.JSONSummaryOver {
		if s, ok := Summarize([]byte(text)); ok {
			text, changed = s, true
			rep.Summarized = true
		}
	}
	if o.MaxOutputBytes > 0 && int64(len(text)) > o.MaxOutputBytes {
		text, changed = Truncate(text, int(o.MaxOutputBytes)), true
		rep.Truncated = true
	}
	if !changed {
		return nil, false
	}
	fields["text"] = mustMarshal(text)
	return mustMarshal(fields), true
}

// Truncate cuts s to about max bytes: its first 60% and its last 40%, with
// a marker between them saying how many bytes were left out. It never
// splits a UTF-8 sequence, so the kept parts may be a few bytes shorter.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head := max * 6 / 10
	tail := max - head
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	from := len(s) - tail
	for from < len(s) && !utf8.RuneStart(s[from]) {
		from++
	}
	omitted := from - head
	return s[:head] + "\n[… " + strconv.Itoa(omitted) + " bytes omitted by mcpgate …]\n" + s[from:]
}

// withMeta returns the _meta object meta with MetaKey set to rep.
func withMeta(meta json.RawMessage, rep Report) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(meta)) > 0 {
		_ = json.Unmarshal(meta, &m) // a malformed _meta is replaced
		if m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	m[MetaKey] = mustMarshal(rep)
	return mustMarshal(m)
}

// mustMarshal encodes values that always encode: raw messages that were
// just decoded, strings and plain structs.
func mustMarshal(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("output: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
