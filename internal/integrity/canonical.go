package integrity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// maxDepth bounds how deeply an item's JSON may nest, as encoding/json's
// does; deeper is refused, not walked.
const maxDepth = 10000

// canonicalize returns the canonical form of the JSON value raw, the bytes
// a fingerprint is taken of: the members of every object sorted by name,
// no insignificant white space, and every string and number exactly as
// served (an escape stays the escape it was, a number keeps its spelling),
// so that two items clients could read differently never share a
// canonical form. It also returns the first ambiguity found inside:
// a member name given twice in one object, or two that differ only in
// case. JSON parsers disagree on those (most keep the last of two equal
// names, some the first; Go's encoding/json matches a struct field in any
// case), so what an operator reviews would not be what every client reads.
func canonicalize(raw []byte) (canon []byte, ambiguity string, err error) {
	c := canonicalizer{in: raw}
	c.space()
	if err := c.value(nil, 0); err != nil {
		return nil, "", err
	}
	if c.space(); c.pos != len(c.in) {
		return nil, "", c.errorf("data after the value")
	}
	return c.out, c.ambiguity, nil
}

type canonicalizer struct {
	in        []byte
	pos       int
	out       []byte
	ambiguity string
}

func (c *canonicalizer) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", c.pos, fmt.Sprintf(format, args...))
}

func (c *canonicalizer) space() {
	for c.pos < len(c.in) && (c.in[c.pos] == ' ' || c.in[c.pos] == '\t' || c.in[c.pos] == '\n' || c.in[c.pos] == '\r') {
		c.pos++
	}
}

// value appends the canonical form of the value at c.pos; path names it
// for an ambiguity's message.
func (c *canonicalizer) value(path []string, depth int) error {
	if depth > maxDepth {
		return c.errorf("nested deeper than %d", maxDepth)
	}
	if c.pos >= len(c.in) {
		return c.errorf("unexpected end")
	}
	switch ch := c.in[c.pos]; {
	case ch == '{':
		return c.object(path, depth)
	case ch == '[':
		return c.array(path, depth)
	case ch == '"':
		s, err := c.str()
		c.out = append(c.out, s...)
		return err
	default:
		start := c.pos
		for c.pos < len(c.in) && !strings.ContainsRune(" \t\n\r,]}:", rune(c.in[c.pos])) {
			c.pos++
		}
		tok := c.in[start:c.pos]
		if !json.Valid(tok) || tok[0] == '{' || tok[0] == '[' || tok[0] == '"' {
			return c.errorf("invalid value %q", truncate(string(tok)))
		}
		c.out = append(c.out, tok...)
		return nil
	}
}

// str returns the string token at c.pos as served, and moves past it.
func (c *canonicalizer) str() ([]byte, error) {
	start := c.pos
	c.pos++
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case '\\':
			c.pos += 2
			continue
		case '"':
			c.pos++
			tok := c.in[start:c.pos]
			if !json.Valid(tok) {
				return nil, c.errorf("invalid string")
			}
			return tok, nil
		}
		c.pos++
	}
	return nil, c.errorf("unterminated string")
}

// member is one member of an object: its decoded name, and its key and
// value in canonical form.
type member struct {
	name string
	key  []byte
	val  []byte
}

func (c *canonicalizer) object(path []string, depth int) error {
	c.pos++ // {
	var members []member
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, "{}"...)
		return nil
	}
	for {
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.errorf("expected a member name")
		}
		key, err := c.str()
		if err != nil {
			return err
		}
		var name string
		if err := json.Unmarshal(key, &name); err != nil {
			return c.errorf("member name: %v", err)
		}
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.errorf("expected ':' after member %q", truncate(name))
		}
		c.pos++
		c.space()
		// The value goes to an output of its own, to be placed once the
		// members are sorted.
		outer := c.out
		c.out = nil
		if err := c.value(append(path, name), depth+1); err != nil {
			return err
		}
		members = append(members, member{name: name, key: key, val: c.out})
		c.out = outer
		c.space()
		if c.pos >= len(c.in) {
			return c.errorf("unterminated object")
		}
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] != ',' {
			return c.errorf("expected ',' or '}'")
		}
		c.pos++
	}
	c.noteAmbiguity(path, members)
	// Sorted by name, then by the key's spelling: two spellings of one name
	// (a repeat, already an ambiguity) keep an order of their own.
	slices.SortStableFunc(members, func(a, b member) int {
		if n := strings.Compare(a.name, b.name); n != 0 {
			return n
		}
		return bytes.Compare(a.key, b.key)
	})
	c.out = append(c.out, '{')
	for i, m := range members {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, m.key...)
		c.out = append(c.out, ':')
		c.out = append(c.out, m.val...)
	}
	c.out = append(c.out, '}')
	return nil
}

func (c *canonicalizer) array(path []string, depth int) error {
	c.pos++ // [
	c.out = append(c.out, '[')
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.space()
		if err := c.value(append(path, fmt.Sprintf("[%d]", i)), depth+1); err != nil {
			return err
		}
		c.space()
		if c.pos >= len(c.in) {
			return c.errorf("unterminated array")
		}
		if c.in[c.pos] == ']' {
			c.pos++
			c.out = append(c.out, ']')
			return nil
		}
		if c.in[c.pos] != ',' {
			return c.errorf("expected ',' or ']'")
		}
		c.pos++
	}
}

// noteAmbiguity records the first repeated or case-variant member name
// of one object.
func (c *canonicalizer) noteAmbiguity(path []string, members []member) {
	if c.ambiguity != "" || len(members) < 2 {
		return
	}
	seen := make(map[string]string, len(members)) // by folded name
	for _, m := range members {
		f := fold(m.name)
		other, ok := seen[f]
		switch {
		case !ok:
			seen[f] = m.name
			continue
		case other == m.name:
			c.ambiguity = fmt.Sprintf("its member %q is given twice%s, and JSON parsers disagree on which one they read", truncate(m.name), where(path))
		default:
			c.ambiguity = fmt.Sprintf("its members %q and %q differ only in case%s, and some JSON parsers read one for the other", truncate(other), truncate(m.name), where(path))
		}
		return
	}
}

// fold maps s to one spelling per class of names that strings.EqualFold
// (and so Go's encoding/json) takes for equal: each rune becomes the
// least of its simple case folding orbit.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}

func where(path []string) string {
	if len(path) == 0 {
		return ""
	}
	return " (in " + truncate(strings.Join(path, ".")) + ")"
}

func truncate(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
