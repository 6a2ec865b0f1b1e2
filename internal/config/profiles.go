package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Profile is one [profiles.NAME] table: a named selection of the
// catalog, served at the endpoint's path plus "/NAME" and chosen by
// clients as their default. A client sees what its profile selects and
// its policy allows, never more.
type Profile struct {
	Name        string
	File        string
	Line        int
	Description string
	Backends    []string // globs over backend names; default ["*"]
	Tools       []string // globs over exposed tool names, "!" excludes, last match wins
	Resources   []string // globs over resource URIs (and URI templates)
	Prompts     []string // globs over exposed prompt names
	// Annotations are tool annotations a tool must have with these values
	// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint); one
	// a tool does not state has MCP's default.
	Annotations map[string]bool
	// Search serves the profile in search mode: tools/list holds the
	// meta-tools that find and call its tools, not the tools themselves.
	Search bool
	// MaxAddedTools bounds the tools a session in search mode adds to its
	// list (add_tools); default 64.
	MaxAddedTools int
}

// ToolAnnotations are the tool annotations a profile can select by, with
// the value MCP gives each when a tool does not state it.
var ToolAnnotations = map[string]bool{
	"readOnlyHint":    false,
	"destructiveHint": true,
	"idempotentHint":  false,
	"openWorldHint":   true,
}

// DefaultMaxAddedTools is a profile's max_added_tools when unset.
const DefaultMaxAddedTools = 64

// profileName is a profile's name: one segment of a URL path.
var profileName = boundedName{regexp.MustCompile(`^[A-Za-z0-9_-]+$`), 64}

func defaultProfile(name string) *Profile {
	return &Profile{Name: name, Backends: []string{"*"}, Tools: []string{"*"}, Resources: []string{"*"}, Prompts: []string{"*"}, MaxAddedTools: DefaultMaxAddedTools}
}

func profileFields() []field[Profile] {
	return []field[Profile]{
		{"description", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return d.str(at, v, &p.Description, nil)
		}},
		{"backends", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return d.strList(at, v, &p.Backends, checkGlob)
		}},
		{"tools", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return d.strList(at, v, &p.Tools, checkGlob)
		}},
		{"resources", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return d.strList(at, v, &p.Resources, checkGlob)
		}},
		{"prompts", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return d.strList(at, v, &p.Prompts, checkGlob)
		}},
		{"annotations", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return d.annotations(at, v, &p.Annotations)
		}},
		{"search", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return d.boolean(at, v, &p.Search)
		}},
		{"max_added_tools", func(d *decoder, at keyPath, v any, p *Profile) bool {
			return integer(d, at, v, &p.MaxAddedTools, 0, 10000)
		}},
	}
}

// annotations decodes a table of tool annotations and the values a tool
// must have for them.
func (d *decoder) annotations(at keyPath, v any, dst *map[string]bool) bool {
	t, ok := d.table(at, v, "a table of annotations", "write annotations = { readOnlyHint = true }")
	if !ok {
		return false
	}
	known := slices.Sorted(maps.Keys(ToolAnnotations))
	out := map[string]bool{}
	good := true
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if _, ok := ToolAnnotations[k]; !ok {
			d.unknown(at.child(k), known, "tools can be selected by "+strings.Join(known, ", "))
			good = false
			continue
		}
		var b bool
		if !d.boolean(at.child(k), t[k], &b) {
			good = false
			continue
		}
		out[k] = b
	}
	if good {
		*dst = out
	}
	return good
}

// profiles decodes the [profiles] table of one file into cfg.
func (d *decoder) profiles(at keyPath, v any, cfg *Config) {
	t, ok := d.table(at, v, "a table of profiles", "write a [profiles.NAME] header for each profile")
	if !ok {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(t)) {
		pat := at.child(name)
		if prev, ok := cfg.Profiles[name]; ok {
			d.fail(pat, "profile defined twice: first at %s:%d; keep one definition", prev.File, prev.Line)
			continue
		}
		if !profileName.MatchString(name) {
			d.fail(pat, `invalid profile name %q; use 1 to 64 letters, digits, "_" or "-" (it is a segment of the endpoint's path)`, name)
			continue
		}
		if name == ServerCardSegment {
			d.fail(pat, `the profile name %q is reserved: ENDPOINT/%s is the endpoint's server card (server_card in [gateway]); name the profile otherwise`, name, name)
			continue
		}
		pt, ok := d.table(pat, t[name], "a table", "write the profile's keys below [profiles.NAME]")
		if !ok {
			continue
		}
		p := defaultProfile(name)
		p.File, p.Line = d.f.path, d.f.lookup(pat).line
		if len(decodeTable(d, pat, pt, profileFields(), p)) > 0 {
			continue
		}
		cfg.Profiles[name] = p
	}
}

// profileKeys returns the keys of a [profiles.NAME] table.
func profileKeys() []string {
	var keys []string
	for _, f := range profileFields() {
		keys = append(keys, f.key)
	}
	return keys
}

// checkProfiles reports clients whose default profile is not configured.
func (l *loader) checkProfiles(cfg *Config) {
	names := slices.Sorted(maps.Keys(cfg.Profiles))
	for _, cname := range slices.Sorted(maps.Keys(cfg.Clients)) {
		c := cfg.Clients[cname]
		if c.Profile == "" || cfg.Profiles[c.Profile] != nil {
			continue
		}
		msg := fmt.Sprintf("profile %q is not configured; define [profiles.%s] or remove the key", c.Profile, c.Profile)
		if s := closestKey(c.Profile, names); s != "" {
			msg = fmt.Sprintf("profile %q is not configured (did you mean %q?)", c.Profile, s)
		}
		l.failClient(c, "profile", msg)
	}
}

// failClient reports a problem with key of client c, at the line where the
// key was written in c's file.
func (l *loader) failClient(c *Client, key, msg string) {
	at := keyPath{"clients", c.Name, key}
	for _, f := range l.files {
		if f.path == c.File {
			(&decoder{l: l, f: f}).fail(at, "%s", msg)
			return
		}
	}
	l.add(0, &Error{File: c.File, Line: c.Line, Key: at.String(), Msg: msg})
}

// Equal reports whether p and o define the same profile, ignoring File
// and Line.
func (p *Profile) Equal(o *Profile) bool {
	if p == nil || o == nil {
		return p == o
	}
	return p.Name == o.Name && p.Description == o.Description && slices.Equal(p.Backends, o.Backends) &&
		slices.Equal(p.Tools, o.Tools) && slices.Equal(p.Resources, o.Resources) && slices.Equal(p.Prompts, o.Prompts) &&
		maps.Equal(p.Annotations, o.Annotations) && p.Search == o.Search && p.MaxAddedTools == o.MaxAddedTools
}

// ServerCardSegment is the path segment below an endpoint (the endpoint
// itself or a profile's) where its server card is served.
const ServerCardSegment = "server-card"

// checkProfileName accepts a profile's name, or "" for none.
func checkProfileName(s string) string {
	if s != "" && !profileName.MatchString(s) {
		return fmt.Sprintf(`%q is not a profile name; profiles are named with 1 to 64 letters, digits, "_" or "-"`, s)
	}
	return ""
}
