// Package access decides who may call the gateway and what each caller may
// use: client identities from tokens and peer credentials, per-client
// policy over tools, resources and prompts, and per-client limits.
package access

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind is what a policy rule list applies to.
type Kind int

// The kinds of names a policy filters.
const (
	Tools     Kind = iota // exposed tool names
	Resources             // resource URIs and URI templates
	Prompts               // exposed prompt names
)

// Policy says which tools, resources and prompts a client may see and use.
// Each list is an ordered list of globs ("*" any run of characters, "?" one
// character); a leading "!" excludes; the last pattern that matches a name
// decides, and a name no pattern matches is hidden. The zero Policy hides
// everything; AllowAll shows everything.
type Policy struct {
	rules [3][]string
	all   bool
}

// AllowAll is the policy of a client without restrictions.
func AllowAll() *Policy { return &Policy{rules: [3][]string{{"*"}, {"*"}, {"*"}}, all: true} }

// NewPolicy returns the policy of the given pattern lists.
func NewPolicy(tools, resources, prompts []string) *Policy {
	p := &Policy{rules: [3][]string{slices.Clone(tools), slices.Clone(resources), slices.Clone(prompts)}}
	p.all = onlyStar(tools) && onlyStar(resources) && onlyStar(prompts)
	return p
}

func onlyStar(l []string) bool { return len(l) == 1 && l[0] == "*" }

// Unrestricted reports whether the policy shows everything.
func (p *Policy) Unrestricted() bool { return p == nil || p.all }

// Allows reports whether a name of the given kind is visible. A resource
// URI that is not in normal form (see NormalURI) is visible only to a
// policy that shows every resource: patterns match the URI as written,
// and a backend reads it resolved.
func (p *Policy) Allows(k Kind, name string) bool {
	if p.Unrestricted() {
		return true
	}
	if k == Resources && !onlyStar(p.rules[k]) && !NormalURI(name) {
		return false
	}
	allowed := false
	for _, pat := range p.rules[k] {
		neg := len(pat) > 0 && pat[0] == '!'
		if neg {
			pat = pat[1:]
		}
		if Match(pat, name) {
			allowed = !neg
		}
	}
	return allowed
}

var kindKeys = [...]string{Tools: "tools", Resources: "resources", Prompts: "prompts"}

// Rule says which rule of the policy decides about name, for the journal:
// `tools pattern "!gh_delete*" hides it`, or `no pattern of tools shows
// it` when none matches.
func (p *Policy) Rule(k Kind, name string) string {
	if p.Unrestricted() {
		return "no policy: everything is shown"
	}
	if k == Resources && !onlyStar(p.rules[k]) && !NormalURI(name) {
		return "the URI has a dot segment, an empty segment or an encoded slash, which resource patterns cannot judge: use its normal form"
	}
	rules := p.rules[k]
	for i := len(rules) - 1; i >= 0; i-- {
		pat := rules[i]
		neg := len(pat) > 0 && pat[0] == '!'
		if Match(strings.TrimPrefix(pat, "!"), name) {
			verb := "shows"
			if neg {
				verb = "hides"
			}
			return fmt.Sprintf("%s pattern %q %s it", kindKeys[k], pat, verb)
		}
	}
	return fmt.Sprintf("no pattern of %s shows it", kindKeys[k])
}

// Match reports whether name matches the glob pattern: "*" matches any run
// of characters ("/" included, so URIs match as a whole), "?" exactly one,
// every other character itself.
func Match(pattern, name string) bool {
	// Iterative matching with one backtrack point: linear in practice,
	// never exponential.
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			switch pattern[p] {
			case '*':
				starP, starN = p, n
				p++
				continue
			case '?':
				_, size := utf8.DecodeRuneInString(name[n:])
				p++
				n += size
				continue
			default:
				if pattern[p] == name[n] {
					p++
					n++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star absorb one more character.
		_, size := utf8.DecodeRuneInString(name[starN:])
		starN += size
		p, n = starP+1, starN
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// NormalURI reports whether the path of uri is in the normal form a
// resource pattern can judge: no "." or ".." segment, no empty segment
// ("//"), no backslash, and no percent-encoded ".", "/" or "\\", any of
// which a backend may resolve to a path the pattern does not name
// ("file:///srv/docs/../secret" matches "file:///srv/docs/*").
func NormalURI(uri string) bool {
	rest := uri
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		rest = rest[i+1:]
	}
	if after, ok := strings.CutPrefix(rest, "//"); ok { // the authority
		rest = after
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[i:]
		} else {
			rest = ""
		}
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	if strings.Contains(rest, "//") || strings.ContainsRune(rest, '\\') {
		return false
	}
	for i := 0; i+2 < len(rest); i++ {
		if rest[i] == '%' {
			switch strings.ToLower(rest[i+1 : i+3]) {
			case "2e", "2f", "5c":
				return false
			}
		}
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
