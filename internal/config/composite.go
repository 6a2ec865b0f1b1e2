package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Composite is one [composites.NAME] table: a tool that calls other tools
// in order.
type Composite struct {
	Name        string
	File        string
	Line        int
	Description string
	InputSchema map[string]any // a JSON Schema object; default {"type": "object"}
	Steps       []Step
	// Result picks what the composite returns: "" (the last step's
	// result), "steps.N" (step N's result), or a template whose expansion
	// is returned as text.
	Result string
}

// Step is one call of a composite.
type Step struct {
	Tool      string         // the exposed name of the tool to call
	Arguments map[string]any // values may hold {{input.x}} and {{steps.N.…}} templates
}

// Equal reports whether two composites define the same tool.
func (c *Composite) Equal(o *Composite) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Name == o.Name && c.Description == o.Description && c.Result == o.Result &&
		reflect.DeepEqual(c.InputSchema, o.InputSchema) && reflect.DeepEqual(c.Steps, o.Steps)
}

var (
	compositeName = boundedName{regexp.MustCompile(`^[A-Za-z0-9_.-]+$`), 64}
	stepRef       = regexp.MustCompile(`^steps\.([0-9]+)(\..*)?$`)
)

func compositeFields() []field[Composite] {
	return []field[Composite]{
		{"description", func(d *decoder, at keyPath, v any, c *Composite) bool {
			return d.str(at, v, &c.Description, nil)
		}},
		{"input_schema", func(d *decoder, at keyPath, v any, c *Composite) bool {
			return d.schema(at, v, &c.InputSchema)
		}},
		{"steps", func(d *decoder, at keyPath, v any, c *Composite) bool {
			return d.steps(at, v, c)
		}},
		{"result", func(d *decoder, at keyPath, v any, c *Composite) bool {
			return d.str(at, v, &c.Result, nil)
		}},
	}
}

// compositeKeys returns the keys of a [composites.NAME] table.
func compositeKeys() []string {
	var keys []string
	for _, f := range compositeFields() {
		keys = append(keys, f.key)
	}
	return keys
}

// composites decodes the [composites] table of one file into cfg.
func (d *decoder) composites(at keyPath, v any, cfg *Config) {
	t, ok := d.table(at, v, "a table of composites", "write a [composites.NAME] header for each composite tool")
	if !ok {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(t)) {
		cat := at.child(name)
		if prev, ok := cfg.Composites[name]; ok {
			d.fail(cat, "composite defined twice: first at %s:%d; keep one definition", prev.File, prev.Line)
			continue
		}
		if !compositeName.MatchString(name) {
			d.fail(cat, `invalid composite name %q; use 1 to 64 letters, digits, "_", "." or "-"`, name)
			continue
		}
		ct, ok := d.table(cat, t[name], "a table", "write the composite's keys below [composites.NAME]")
		if !ok {
			continue
		}
		c := &Composite{Name: name, File: d.f.path, Line: d.f.lookup(cat).line, InputSchema: map[string]any{"type": "object"}}
		if len(decodeTable(d, cat, ct, compositeFields(), c)) > 0 {
			continue
		}
		if len(c.Steps) == 0 {
			d.fail(cat, `a composite needs steps; write steps = [{ tool = "backend__tool", arguments = { … } }, …]`)
			continue
		}
		if !d.checkResult(cat, c) {
			continue
		}
		cfg.Composites[name] = c
	}
}

// steps decodes the array of steps and checks their templates: {{input.x}}
// must name a declared argument and {{steps.N…}} an earlier step.
func (d *decoder) steps(at keyPath, v any, c *Composite) bool {
	arr, ok := v.([]any)
	if !ok {
		d.wrongType(at, v, "an array of tables", `write steps = [{ tool = "backend__tool", arguments = { … } }, …]`)
		return false
	}
	good := true
	for i, e := range arr {
		t, ok := e.(map[string]any)
		if !ok {
			d.failElem(at, i, "step %d: expected a table, got %s", i, describe(e))
			good = false
			continue
		}
		var s Step
		for _, k := range slices.Sorted(maps.Keys(t)) {
			switch k {
			case "tool":
				if tool, ok := t[k].(string); ok && tool != "" {
					s.Tool = tool
				} else {
					d.failElem(at, i, "step %d: tool must be a tool's exposed name, such as \"github__get_issue\"", i)
					good = false
				}
			case "arguments":
				if args, ok := t[k].(map[string]any); ok {
					s.Arguments = args
				} else {
					d.failElem(at, i, "step %d: arguments must be a table", i)
					good = false
				}
			default:
				if near := closestKey(k, []string{"tool", "arguments"}); near != "" {
					d.failElem(at, i, "step %d: unknown key %q (did you mean %q?)", i, k, near)
				} else {
					d.failElem(at, i, "step %d: unknown key %q; a step has tool and arguments", i, k)
				}
				good = false
			}
		}
		if s.Tool == "" {
			if _, set := t["tool"]; !set {
				d.failElem(at, i, "step %d has no tool; set tool = \"backend__tool\"", i)
				good = false
			}
			continue
		}
		for _, ref := range templateRefs(s.Arguments) {
			if msg := checkRef(ref, i, c.InputSchema); msg != "" {
				d.failElem(at, i, "step %d: {{%s}}: %s", i, ref, msg)
				good = false
			}
		}
		c.Steps = append(c.Steps, s)
	}
	return good
}

// checkResult checks the result selection once the steps are known.
func (d *decoder) checkResult(at keyPath, c *Composite) bool {
	if c.Result == "" {
		return true
	}
	refs := Placeholders(c.Result)
	if m := stepRef.FindStringSubmatch(c.Result); m != nil && m[2] == "" {
		refs = []string{c.Result}
	}
	for _, ref := range refs {
		if msg := checkRef(ref, len(c.Steps), c.InputSchema); msg != "" {
			d.fail(at.child("result"), "{{%s}}: %s", ref, msg)
			return false
		}
	}
	return true
}

// checkRef checks one template reference made in step i (len(steps) for
// the result): "" if it is fine, else what is wrong.
func checkRef(ref string, i int, schema map[string]any) string {
	if arg, ok := strings.CutPrefix(ref, "input."); ok {
		props, _ := schema["properties"].(map[string]any)
		name, _, _ := strings.Cut(arg, ".")
		if _, ok := props[name]; !ok {
			return fmt.Sprintf("the input_schema declares no property %q", name)
		}
		return ""
	}
	m := stepRef.FindStringSubmatch(ref)
	if m == nil {
		return `use {{input.NAME}}, {{steps.N.structuredContent.PATH}} or {{steps.N.text}}`
	}
	n, _ := strconv.Atoi(m[1])
	if n >= i {
		return fmt.Sprintf("step %d has not run yet here; refer to an earlier step (0 to %d)", n, i-1)
	}
	if rest := m[2]; rest != "" && rest != ".text" && !strings.HasPrefix(rest, ".structuredContent") {
		return `after steps.N use .text or .structuredContent.PATH`
	}
	return ""
}

// templateRefs returns every {{…}} reference in the string values of v,
// however deep.
func templateRefs(v any) []string {
	var refs []string
	switch v := v.(type) {
	case string:
		refs = Placeholders(v)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			refs = append(refs, templateRefs(v[k])...)
		}
	case []any:
		for _, e := range v {
			refs = append(refs, templateRefs(e)...)
		}
	}
	return refs
}
