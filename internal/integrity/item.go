package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/config"
)

// Kind is what an item is.
type Kind string

// The kinds of item a backend offers that are pinned.
const (
	Tool     Kind = "tool"
	Prompt   Kind = "prompt"
	Template Kind = "template" // a resource template, named by its uriTemplate
)

// pinnedFields are the members of each kind that a model reads: the
// members format 1 of the state file pinned, kept to recognise what it
// approved (see legacyFingerprint). Format 2 pins the whole item.
var pinnedFields = map[Kind][]string{
	Tool:     {"name", "title", "description", "inputSchema", "outputSchema", "annotations"},
	Prompt:   {"name", "title", "description", "arguments"},
	Template: {"uriTemplate", "name", "title", "description", "mimeType", "annotations"},
}

// nameField is the member that names an item of each kind.
var nameField = map[Kind]string{Tool: "name", Prompt: "name", Template: "uriTemplate"}

// item is one tool, prompt or template as a backend offers it now.
type item struct {
	kind      Kind
	name      string
	canon     []byte                     // the whole item, canonical (see canonicalize)
	fields    map[string]json.RawMessage // its members, canonical, for diffs and limits
	sum       string                     // hex SHA-256 of canon: the fingerprint
	ambiguity string                     // a repeated or case-variant member inside it; "" if none
	raw       json.RawMessage            // as the backend sent it, and the catalog serves it
}

// key names an item within its backend: "tool:NAME".
func (it *item) key() string { return string(it.kind) + ":" + it.name }

// id names exactly this version of the item: "tool:NAME@FINGERPRINT", as
// an approval or rejection names what the operator reviewed.
func (it *item) id() string { return it.key() + "@" + it.sum }

// parseItem reads raw, as served, into an item. It returns nil for one
// that is not a JSON object with a name, which the catalog ignores
// anyway.
func parseItem(kind Kind, raw json.RawMessage) *item {
	canon, ambiguity, err := canonicalize(raw)
	if err != nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(canon, &fields) != nil {
		return nil
	}
	var name string
	if json.Unmarshal(fields[nameField[kind]], &name) != nil || name == "" {
		return nil
	}
	sum := sha256.Sum256(canon)
	return &item{kind: kind, name: name, canon: canon, fields: fields, sum: hex.EncodeToString(sum[:]), ambiguity: ambiguity, raw: raw}
}

// legacyFingerprint is the fingerprint format 1 of the state file gave
// raw: of the pinnedFields of a decode that matches names exactly and
// keeps the last of a repeated one. It only recognises what format 1
// approved; nothing is decided on it alone (see filter.list).
func legacyFingerprint(kind Kind, raw json.RawMessage) string {
	var all map[string]json.RawMessage
	if json.Unmarshal(raw, &all) != nil {
		return ""
	}
	fields := map[string]json.RawMessage{}
	for _, f := range pinnedFields[kind] {
		if v, ok := all[f]; ok {
			fields[f] = legacyCanonical(v)
		}
	}
	return fingerprint(fields)
}

// legacyCanonical re-encodes a JSON value with sorted object keys and no
// insignificant space, as format 1 did. Numbers keep their spelling.
func legacyCanonical(v json.RawMessage) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if d.Decode(&x) != nil {
		return v
	}
	return marshal(x)
}

func marshal(x any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(x) // maps encode with sorted keys
	return bytes.TrimRight(b.Bytes(), "\n")
}

// fingerprint is format 1's: the hex SHA-256 of the canonical JSON
// object of fields.
func fingerprint(fields map[string]json.RawMessage) string {
	obj := make(map[string]any, len(fields))
	for k, v := range fields {
		obj[k] = v
	}
	sum := sha256.Sum256(marshal(obj))
	return hex.EncodeToString(sum[:])
}

// violation returns why it must be held back whatever the policy, or "":
// a repeated or case-variant member anywhere inside it, hidden
// characters in its name, bidi controls or invisible tag characters in
// its description, or a description or schema over the limits.
func violation(it *item, lim config.Integrity) string {
	if it.ambiguity != "" {
		return it.ambiguity
	}
	if r, ok := hiddenRune(it.name, isHiddenInName); ok {
		return fmt.Sprintf("its name contains the hidden character %U, which shows as nothing or reorders text", r)
	}
	var desc string
	json.Unmarshal(it.fields["description"], &desc)
	if r, ok := hiddenRune(desc, isHiddenInText); ok {
		return fmt.Sprintf("its description contains the hidden character %U, which shows as nothing or reorders text", r)
	}
	if n := int64(len(desc)); lim.MaxDescriptionBytes > 0 && n > lim.MaxDescriptionBytes {
		return fmt.Sprintf("its description has %d bytes, over max_description_bytes (%d)", n, lim.MaxDescriptionBytes)
	}
	for _, f := range []string{"inputSchema", "outputSchema"} {
		if n := int64(len(it.fields[f])); lim.MaxSchemaBytes > 0 && n > lim.MaxSchemaBytes {
			return fmt.Sprintf("its %s has %d bytes, over max_schema_bytes (%d)", f, n, lim.MaxSchemaBytes)
		}
	}
	return ""
}

func hiddenRune(s string, hidden func(rune) bool) (rune, bool) {
	for _, r := range s {
		if hidden(r) {
			return r, true
		}
	}
	return 0, false
}

// isHiddenInName: in a name every format character (zero-width spaces and
// joiners, bidi controls, tag characters, the byte order mark) and every
// control character hides what the name really is.
func isHiddenInName(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.IsControl(r) || r == utf8.RuneError
}

// isHiddenInText: in a description, bidi controls reorder what a person
// reads and tag characters carry text nobody sees; zero-width joiners have
// honest uses there (emoji), so they pass.
func isHiddenInText(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r >= 0xE0000 && r <= 0xE007F
}

// render shows fields for a person in a terminal, one member after the
// other: strings as their text, other values as indented JSON, and
// characters that print as nothing spelled out as <U+XXXX>.
func render(fields map[string]json.RawMessage) []byte {
	var b strings.Builder
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		b.WriteString(f + ":\n")
		var s string
		var text string
		if json.Unmarshal(fields[f], &s) == nil {
			text = s
		} else {
			var ind bytes.Buffer
			json.Indent(&ind, fields[f], "", "  ")
			text = ind.String()
		}
		for _, line := range strings.Split(text, "\n") {
			b.WriteString("  " + visible(line) + "\n")
		}
	}
	return []byte(b.String())
}

// visible spells out the characters of s that print as nothing or move
// text, as <U+XXXX>.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		if isHiddenInName(r) && r != '\t' {
			fmt.Fprintf(&b, "<%U>", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
