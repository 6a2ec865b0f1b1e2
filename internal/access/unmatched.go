package access

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/suggest"
)

// Unmatched is a pattern of a client's policy that matches nothing: a typo
// such as "everthing__echo" silently shows the client nothing.
type Unmatched struct {
	Client  string
	Kind    Kind
	Pattern string
	// Near are the closest names, or pattern rewritings, to suggest.
	Near []string
	// Why says what it fails to match: "matches no current tool", ….
	Why string
}

// String reads `client "ci": tools pattern "everthing__echo" matches no
// current tool; did you mean "everything__echo"?`.
func (u Unmatched) String() string {
	s := fmt.Sprintf("client %q: %s pattern %q %s", u.Client, kindKeys[u.Kind], u.Pattern, u.Why)
	if len(u.Near) > 0 {
		quoted := make([]string, len(u.Near))
		for i, n := range u.Near {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		s += "; did you mean " + strings.Join(quoted, " or ") + "?"
	}
	return s
}

// Names are the names a policy can match, per kind: the exposed tool and
// prompt names, and the resource URIs and URI templates.
type Names [3][]string

// UnmatchedPatterns returns, sorted by client, the patterns of the clients'
// policies that match none of names. Patterns made only of wildcards are
// not checked: "*" on an empty list is no typo.
func UnmatchedPatterns(clients map[string]*config.Client, names Names) []Unmatched {
	var out []Unmatched
	for _, c := range sortedClients(clients) {
		for k, patterns := range [3][]string{Tools: c.Tools, Resources: c.Resources, Prompts: c.Prompts} {
			for _, pat := range patterns {
				glob := strings.TrimPrefix(pat, "!")
				if onlyWildcards(glob) || slices.ContainsFunc(names[k], func(n string) bool { return Match(glob, n) }) {
					continue
				}
				out = append(out, Unmatched{Client: c.Name, Kind: Kind(k), Pattern: pat,
					Near: nearPatterns(pat, names[k]), Why: "matches no current " + strings.TrimSuffix(kindKeys[k], "s")})
			}
		}
	}
	return out
}

// UnmatchedPrefixes returns the tool and prompt patterns that cannot match
// any name the configuration can expose: their literal start names no
// backend's tool_prefix (nor composite_prefix). It needs no running
// gateway, so it is what --check-config can tell; a prefix "" makes every
// pattern possible.
func UnmatchedPrefixes(cfg *config.Config) []Unmatched {
	prefixes := []string{cfg.Gateway.CompositePrefix}
	for _, b := range cfg.Backends {
		if b.ToolPrefix == "" {
			return nil
		}
		prefixes = append(prefixes, b.ToolPrefix)
	}
	var out []Unmatched
	for _, c := range sortedClients(cfg.Clients) {
		for _, k := range []Kind{Tools, Prompts} {
			patterns := c.Tools
			if k == Prompts {
				patterns = c.Prompts
			}
			for _, pat := range patterns {
				glob := strings.TrimPrefix(pat, "!")
				head := glob[:literalLen(glob)]
				possible := func(p string) bool {
					// "files__read" starts with "files__"; "fi*" may.
					return strings.HasPrefix(head, p) || head != glob && strings.HasPrefix(p, head)
				}
				if slices.ContainsFunc(prefixes, possible) {
					continue
				}
				var near []string
				if i := strings.Index(head, "__"); i >= 0 {
					for _, p := range closest(head[:i+2], prefixes) {
						near = append(near, strings.Replace(pat, head[:i+2], p, 1))
					}
				}
				out = append(out, Unmatched{Client: c.Name, Kind: k, Pattern: pat, Near: near,
					Why: "starts with no backend's tool_prefix (nor composite_prefix)"})
			}
		}
	}
	return out
}

// literalLen is the length of the start of glob without a wildcard.
func literalLen(glob string) int {
	if i := strings.IndexAny(glob, "*?"); i >= 0 {
		return i
	}
	return len(glob)
}

// nearPatterns suggests what pat may have meant: the nearest names, or for
// a pattern with wildcards the pattern with the nearest literal start.
func nearPatterns(pat string, names []string) []string {
	neg := strings.HasPrefix(pat, "!")
	glob := strings.TrimPrefix(pat, "!")
	n := literalLen(glob)
	var near []string
	if n == len(glob) {
		near = closest(glob, names)
	} else {
		// Compare the literal start with the names' starts of its length,
		// or, when it names a prefix ("everthing__"), with their prefixes.
		cut := func(name string) (string, bool) { return name[:min(n, len(name))], len(name) >= n }
		if i := strings.Index(glob[:n], "__"); i >= 0 {
			n = i + 2
			cut = func(name string) (string, bool) {
				j := strings.Index(name, "__")
				return name[:max(j+2, 0)], j >= 0
			}
		}
		var heads []string
		for _, name := range names {
			if h, ok := cut(name); ok && !slices.Contains(heads, h) {
				heads = append(heads, h)
			}
		}
		for _, h := range closest(glob[:n], heads) {
			near = append(near, h+glob[n:])
		}
	}
	if neg {
		for i := range near {
			near[i] = "!" + near[i]
		}
	}
	return near
}

func onlyWildcards(glob string) bool { return strings.Trim(glob, "*?") == "" }

// closest returns up to three of names nearest to s, as the catalog's
// did-you-mean does.
func closest(s string, names []string) []string {
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	limit := max(2, len(s)/3)
	for _, n := range names {
		if d := suggest.Distance(strings.ToLower(s), strings.ToLower(n)); d <= limit {
			cands = append(cands, cand{n, d})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
	var out []string
	for _, c := range cands {
		if len(out) == 3 {
			break
		}
		if !slices.Contains(out, c.name) {
			out = append(out, c.name)
		}
	}
	return out
}

func sortedClients(clients map[string]*config.Client) []*config.Client {
	out := make([]*config.Client, 0, len(clients))
	for _, c := range clients {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *config.Client) int { return strings.Compare(a.Name, b.Name) })
	return out
}
