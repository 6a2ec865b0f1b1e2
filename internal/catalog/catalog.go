// Package catalog merges the tools, prompts and resources of many backends
// into the one set the gateway's clients see.
package catalog

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"regexp"
	"sort"
	"strings"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/suggest"
)

// MaxNameLen is the longest tool or prompt name MCP allows.
const MaxNameLen = 128

// Source is one healthy backend's contribution.
type Source struct {
	Backend string // backend name
	Prefix  string // prepended to its tool and prompt names
	Lists   *backend.Lists
}

// Entry is a tool or prompt as exposed to clients.
type Entry struct {
	Name        string          // the exposed name
	Original    string          // the name at the backend
	Backend     string          // the backend that owns it
	Description string          // its description, for listings
	Raw         json.RawMessage // the object sent to clients, under the exposed name
	// ParamHeaders are a tool's parameters mirrored into Mcp-Param-*
	// headers (MCP 2026-07-28), nil for most tools and for prompts.
	ParamHeaders []ParamHeader
}

// Resource is a resource or resource template and its owner.
type Resource struct {
	URI      string // the uri, or the uriTemplate of a template, as clients know it
	Original string // the same at the backend: other for a ui:// URI of a backend with a prefix (see AppURI)
	Backend  string
	Raw      json.RawMessage // under the exposed URI
	match    *regexp.Regexp  // templates only
}

// Catalog is an immutable snapshot of everything the gateway exposes.
type Catalog struct {
	Tools     []Entry
	Prompts   []Entry
	Resources []Resource
	Templates []Resource
	// Conflicts explains every item hidden or renamed while merging.
	Conflicts []string
	// Digests change exactly when the corresponding list changes.
	ToolsDigest, PromptsDigest, ResourcesDigest string

	tools, prompts map[string]int
	resources      map[string]int
	prefixes       map[string]string // each backend's tool prefix, for its ui:// URIs
	memo           *memos            // decisions about the tools, by key (DecideTool)
}

// Build merges sources. They must be sorted by backend name: on a name
// collision the later backend loses the item, and the conflict is reported.
// Resources come first, so that a tool's view (see apps.go) is known to
// be its own backend's when the tool is added.
func Build(sources []Source) *Catalog {
	c := &Catalog{tools: map[string]int{}, prompts: map[string]int{}, resources: map[string]int{}, prefixes: map[string]string{}, memo: &memos{}}
	th, ph, rh := sha256.New(), sha256.New(), sha256.New()
	for _, src := range sources {
		if src.Prefix != "" {
			c.prefixes[src.Backend] = src.Prefix
		}
		for _, raw := range src.Lists.Resources {
			c.addResource(src, raw, rh)
		}
		for _, raw := range src.Lists.Templates {
			c.addTemplate(src, raw, rh)
		}
	}
	for _, src := range sources {
		c.Tools = c.addEntries(c.Tools, c.tools, "tool", src, src.Lists.Tools, th)
		c.Prompts = c.addEntries(c.Prompts, c.prompts, "prompt", src, src.Lists.Prompts, ph)
	}
	c.ToolsDigest, c.PromptsDigest, c.ResourcesDigest = digest(th), digest(ph), digest(rh)
	return c
}

func digest(h hash.Hash) string { return string(h.Sum(nil)) }

func (c *Catalog) addEntries(list []Entry, index map[string]int, kind string, src Source, items []json.RawMessage, h hash.Hash) []Entry {
	for _, raw := range items {
		nameRaw, span, ok := jsonrpc.Lookup(raw, "name")
		original, isString := jsonrpc.StringValue(nameRaw)
		if !ok || !isString || original == "" {
			c.Conflicts = append(c.Conflicts, fmt.Sprintf("backend %q: ignored a %s without a name", src.Backend, kind))
			continue
		}
		name := ExposedName(src.Prefix, original)
		if owner, taken := index[name]; taken {
			c.Conflicts = append(c.Conflicts, fmt.Sprintf(
				"%s %q of backend %q is hidden: backend %q already exposes that name; give one of them a tool_prefix",
				kind, name, src.Backend, list[owner].Backend))
			continue
		}
		if name != src.Prefix+original {
			c.Conflicts = append(c.Conflicts, fmt.Sprintf(
				"%s %q of backend %q is exposed as %q to stay within MCP's name rules (1-128 characters of A-Z a-z 0-9 _ . -)",
				kind, original, src.Backend, name))
		}
		exposed := raw
		if name != original {
			exposed = jsonrpc.Replace(raw, span, jsonrpc.AppendString(nil, name))
		}
		if kind == "tool" {
			var view string
			exposed, view = withAppURI(exposed, src.Prefix)
			if why := c.viewTaken(src.Backend, name, view); why != "" {
				c.Conflicts = append(c.Conflicts, why)
				continue
			}
		}
		descRaw, _, _ := jsonrpc.Lookup(raw, "description")
		desc, _ := jsonrpc.StringValue(descRaw)
		index[name] = len(list)
		entry := Entry{Name: name, Original: original, Backend: src.Backend, Description: desc, Raw: exposed}
		if kind == "tool" {
			entry.ParamHeaders = paramHeaders(raw)
		}
		list = append(list, entry)
		h.Write(exposed)
		h.Write([]byte{0})
	}
	return list
}

func (c *Catalog) addResource(src Source, raw json.RawMessage, h hash.Hash) {
	owner := src.Backend
	uriRaw, _, _ := jsonrpc.Lookup(raw, "uri")
	original, ok := jsonrpc.StringValue(uriRaw)
	uri := AppURI(src.Prefix, original)
	if !ok || uri == "" {
		c.Conflicts = append(c.Conflicts, fmt.Sprintf("backend %q: ignored a resource without a uri", owner))
		return
	}
	if i, taken := c.resources[uri]; taken {
		c.Conflicts = append(c.Conflicts, fmt.Sprintf("resource %q of backend %q is hidden: backend %q already exposes that uri", uri, owner, c.Resources[i].Backend))
		return
	}
	raw = withURI(raw, "uri", original, uri)
	c.resources[uri] = len(c.Resources)
	c.Resources = append(c.Resources, Resource{URI: uri, Original: original, Backend: owner, Raw: raw})
	h.Write(raw)
	h.Write([]byte{0})
}

func (c *Catalog) addTemplate(src Source, raw json.RawMessage, h hash.Hash) {
	owner := src.Backend
	tplRaw, _, _ := jsonrpc.Lookup(raw, "uriTemplate")
	original, ok := jsonrpc.StringValue(tplRaw)
	tpl := AppURI(src.Prefix, original)
	if !ok || tpl == "" {
		c.Conflicts = append(c.Conflicts, fmt.Sprintf("backend %q: ignored a resource template without a uriTemplate", owner))
		return
	}
	raw = withURI(raw, "uriTemplate", original, tpl)
	// A URI two backends' templates match goes to the first of them: say
	// so where their literal starts allow it, since reads (and what their
	// URIs carry) meant for one would reach the other.
	lit, _, _ := strings.Cut(tpl, "{")
	for _, t := range c.Templates {
		other, _, _ := strings.Cut(t.URI, "{")
		if t.Backend != owner && (strings.HasPrefix(lit, other) || strings.HasPrefix(other, lit)) {
			c.Conflicts = append(c.Conflicts, fmt.Sprintf("resource template %q of backend %q may match URIs of template %q of backend %q; a URI both match is read from %q",
				tpl, owner, t.URI, t.Backend, t.Backend))
			break
		}
	}
	c.Templates = append(c.Templates, Resource{URI: tpl, Original: original, Backend: owner, Raw: raw, match: templateRegexp(tpl)})
	h.Write(raw)
	h.Write([]byte{0})
}

// Tool returns the tool exposed under name.
func (c *Catalog) Tool(name string) (*Entry, bool) { return lookup(c.Tools, c.tools, name) }

// Prompt returns the prompt exposed under name.
func (c *Catalog) Prompt(name string) (*Entry, bool) { return lookup(c.Prompts, c.prompts, name) }

func lookup(list []Entry, index map[string]int, name string) (*Entry, bool) {
	i, ok := index[name]
	if !ok {
		return nil, false
	}
	return &list[i], true
}

// ResourceOwner returns the backend that serves uri: the owner of a listed
// resource with that uri, else of the first template matching it.
func (c *Catalog) ResourceOwner(uri string) (string, bool) {
	if i, ok := c.resources[uri]; ok {
		return c.Resources[i].Backend, true
	}
	for _, t := range c.Templates {
		if t.match != nil && t.match.MatchString(uri) {
			return t.Backend, true
		}
	}
	return "", false
}

// ExposedName is the name a backend's tool or prompt gets: the prefix plus
// the original name, with characters MCP does not allow replaced by '_' and
// shortened to MaxNameLen, keeping a hash of the full name so that
// shortened names stay distinct.
func ExposedName(prefix, original string) string {
	name := prefix + original
	clean := strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, name)
	if len(clean) > MaxNameLen {
		sum := sha256.Sum256([]byte(name))
		clean = fmt.Sprintf("%s_%x", clean[:MaxNameLen-9], sum[:4])
	}
	return clean
}

// Closest returns up to n exposed tool names that look like name: the tool
// whose unprefixed name it is, then the nearest by edit distance.
func (c *Catalog) Closest(name string, n int) []string {
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	limit := max(2, len(name)/3)
	for _, e := range c.Tools {
		switch {
		case e.Original == name:
			cands = append(cands, cand{e.Name, -1})
		case strings.Contains(e.Name, name) && len(name) >= 3:
			cands = append(cands, cand{e.Name, 0})
		default:
			if d := suggest.Distance(strings.ToLower(name), strings.ToLower(e.Name)); d <= limit {
				cands = append(cands, cand{e.Name, d})
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
	var out []string
	for _, c := range cands {
		if len(out) == n {
			break
		}
		out = append(out, c.name)
	}
	return out
}

// templateRegexp turns an RFC 6570 URI template into a regexp matching the
// URIs it can expand to. Simple expressions match one path segment;
// reserved and fragment expansions match anything; query and path-style
// expansions are optional.
func templateRegexp(tpl string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for tpl != "" {
		open := strings.IndexByte(tpl, '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(tpl))
			break
		}
		close := strings.IndexByte(tpl[open:], '}')
		if close < 0 {
			return nil
		}
		b.WriteString(regexp.QuoteMeta(tpl[:open]))
		expr := tpl[open+1 : open+close]
		tpl = tpl[open+close+1:]
		op := byte(0)
		if expr != "" {
			op = expr[0]
		}
		switch op {
		case '+', '#':
			b.WriteString(".*")
		case '?', '&':
			b.WriteString(`([?&].*)?`)
		case '/', ';', '.':
			b.WriteString(`([/;.][^?#]*)?`)
		default:
			b.WriteString(`[^/?#]*`)
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}
