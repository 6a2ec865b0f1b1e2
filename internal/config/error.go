package config

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/suggest"
)

// Error is one problem found in a configuration file. Its text reads
// "FILE:LINE:COL: KEY: MSG", where MSG says what is wrong and what to do.
// Col is 0 when only the line is known (it is then left out of the text),
// Line is 0 only for a file that could not be read at all, and Key is empty
// when the problem is not about one key.
type Error struct {
	File string
	Line int
	Col  int
	Key  string // dotted TOML key path, such as backends.github.timeout
	Msg  string
	Err  error // underlying error, if any (for example from reading the file)
}

// Error formats e as "FILE:LINE:COL: KEY: MSG".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Col))
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, so errors.Is(err, fs.ErrNotExist)
// works for a missing main file.
func (e *Error) Unwrap() error { return e.Err }

// keyPath is a TOML key split into its parts.
type keyPath []string

// child returns k extended by part, never sharing k's backing array.
func (k keyPath) child(part string) keyPath {
	return append(k[:len(k):len(k)], part)
}

// id is the lookup key for k in a position index; parts may contain dots, so
// they are joined with a byte TOML keys cannot hold unescaped.
func (k keyPath) id() string { return strings.Join(k, "\x00") }

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// String spells k as TOML would, quoting parts that are not bare keys.
func (k keyPath) String() string {
	parts := make([]string, len(k))
	for i, p := range k {
		if bareKey.MatchString(p) {
			parts[i] = p
		} else {
			parts[i] = strconv.Quote(p)
		}
	}
	return strings.Join(parts, ".")
}

// closestKey returns the known key closest to an unknown one, or "" when none is
// close enough to be a likely typo. Case and "-" versus "_" are ignored.
func closestKey(unknown string, known []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	u := norm(unknown)
	if len(u) > 100 {
		return "" // far from every known key; spare the quadratic distance
	}
	limit := 2
	if len(u) <= 4 {
		limit = 1
	}
	best, bestDist := "", limit+1
	for _, k := range known {
		if d := suggest.Distance(u, norm(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}
