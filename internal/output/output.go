// Package output shrinks tools/call results before a model sees them: it summarises large JSON text and truncates long text.
package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
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
	// Refused is set when the result was replaced by an error result: its
	// content was ambiguous.
	Refused bool `json:"refused,omitempty"`
}

// Process applies o to the raw result of a tools/call. It returns result
// itself, not re-encoded, when nothing needs changing; the check is the
// length of result first, so small results cost nothing. A changed result
// carries _meta["io.mcpgate/output"] with the Report. structuredContent,
// images, audio and every member it does not change keep their bytes: the
// changed text items are spliced into the original document.
func Process(result json.RawMessage, o Options) (json.RawMessage, Report) {
	rep := Report{OriginalBytes: int64(len(result)), ReturnedBytes: int64(len(result))}
	// A JSON string's encoding is never shorter than its text, so a result
	// no longer than the threshold holds no text longer than it.
	if o.Off() || int64(len(result)) <= o.threshold() {
		return result, rep
	}
	content, span, err := jsonrpc.Find(result, "content")
	if ambiguity(err) != nil {
		return ambiguous(err, rep)
	}
	var items []json.RawMessage
	if err != nil || content == nil || json.Unmarshal(content, &items) != nil {
		return result, rep
	}
	changed := false
	for i, item := range items {
		if int64(len(item)) <= o.threshold() {
			continue
		}
		out, ok, err := processItem(item, o, &rep)
		if err != nil {
			return ambiguous(err, rep)
		}
		if ok {
			items[i] = out
			changed = true
		}
	}
	if !changed {
		return result, rep
	}
	newContent := []byte{'['}
	for i, item := range items {
		if i > 0 {
			newContent = append(newContent, ',')
		}
		newContent = append(newContent, item...)
	}
	out := jsonrpc.Replace(result, span, append(newContent, ']'))
	// ReturnedBytes counts the report itself, whose length depends on the
	// number: settle it by trying until it is consistent.
	for range 3 {
		withReport := withMeta(out, rep)
		if int64(len(withReport)) == rep.ReturnedBytes {
			return withReport, rep
		}
		rep.ReturnedBytes = int64(len(withReport))
	}
	return withMeta(out, rep), rep
}

// processItem summarises and truncates one text content item, splicing
// the new text into it.
func processItem(item json.RawMessage, o Options, rep *Report) (json.RawMessage, bool, error) {
	typ, _, err := jsonrpc.Find(item, "type")
	if err != nil || string(typ) != `"text"` {
		return nil, false, ambiguity(err)
	}
	raw, span, err := jsonrpc.Find(item, "text")
	if err != nil || raw == nil {
		return nil, false, ambiguity(err)
	}
	text, ok := jsonrpc.StringValue(raw)
	if !ok {
		return nil, false, nil
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
		return nil, false, nil
	}
	return jsonrpc.Replace(item, span, mustMarshal(text)), true, nil
}

// ambiguity is err if it says that JSON parsers read a member differently,
// else nil: what is no object is left alone, as before.
func ambiguity(err error) error {
	var amb *jsonrpc.AmbiguousError
	if errors.As(err, &amb) {
		return err
	}
	return nil
}

// ambiguous is the result that replaces one whose content, or a text item
// of it, parsers read differently (err says which member): what a model
// would read of it is not what the pipeline bounded.
func ambiguous(err error, rep Report) (json.RawMessage, Report) {
	out := []byte(`{"content":[{"type":"text","text":`)
	out = append(out, mustMarshal("mcpgate did not pass on this result: "+err.Error()+" in it, which JSON parsers read differently, so its size cannot be bounded")...)
	out = append(out, `}],"isError":true}`...)
	rep.Refused, rep.ReturnedBytes = true, int64(len(out))
	return withMeta(out, rep), rep
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

// withMeta returns the result doc with _meta[MetaKey] set to rep: added
// to an existing _meta object, or as a new _meta member.
func withMeta(doc json.RawMessage, rep Report) json.RawMessage {
	member := append(jsonrpc.AppendString(nil, MetaKey), ':')
	member = append(member, mustMarshal(rep)...)
	if meta, span, ok := jsonrpc.Lookup(doc, "_meta"); ok && len(meta) > 0 && meta[0] == '{' {
		m := map[string]json.RawMessage{}
		if json.Unmarshal(meta, &m) == nil {
			m[MetaKey] = mustMarshal(rep)
			return jsonrpc.Replace(doc, span, mustMarshal(m))
		}
	}
	end := bytes.LastIndexByte(doc, '}')
	out := make([]byte, 0, len(doc)+len(member)+12)
	out = append(out, doc[:end]...)
	out = append(out, `,"_meta":{`...)
	out = append(out, member...)
	out = append(out, '}')
	return append(out, doc[end:]...)
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
