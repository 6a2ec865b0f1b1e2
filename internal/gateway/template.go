package gateway

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// templateEnv resolves a composite's {{input.…}} and {{steps.N.…}}.
type templateEnv struct {
	input map[string]any
	steps []stepResult
}

var (
	templateRe = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)
	wholeRe    = regexp.MustCompile(`^\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}$`)
)

// expand returns v with every template in its strings resolved. A string
// that is exactly one template takes the value with its JSON type.
func (e templateEnv) expand(v any) (any, error) {
	switch v := v.(type) {
	case string:
		if m := wholeRe.FindStringSubmatch(v); m != nil {
			return e.resolve(m[1])
		}
		return e.expandString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			r, err := e.expand(x)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			r, err := e.expand(x)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// expandString spells every template of s as text.
func (e templateEnv) expandString(s string) (string, error) {
	var firstErr error
	out := templateRe.ReplaceAllStringFunc(s, func(m string) string {
		v, err := e.resolve(templateRe.FindStringSubmatch(m)[1])
		if err != nil {
			firstErr = err
			return ""
		}
		if str, ok := v.(string); ok {
			return str
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
	return out, firstErr
}

// resolve looks a reference up.
func (e templateEnv) resolve(ref string) (any, error) {
	parts := strings.Split(ref, ".")
	switch {
	case parts[0] == "input" && len(parts) > 1:
		return walk(e.input, parts[1:], ref)
	case parts[0] == "steps" && len(parts) > 2:
		n, err := strconv.Atoi(parts[1])
		if err != nil || n >= len(e.steps) {
			return nil, fmt.Errorf("{{%s}}: no such earlier step", ref)
		}
		switch parts[2] {
		case "text":
			return e.steps[n].text, nil
		case "structuredContent":
			if e.steps[n].structured == nil {
				return nil, fmt.Errorf("{{%s}}: step %d returned no structuredContent", ref, n)
			}
			return walk(e.steps[n].structured, parts[3:], ref)
		}
	}
	return nil, fmt.Errorf("{{%s}}: not a reference to input or an earlier step", ref)
}

// walk follows a dotted path through objects and (by index) arrays.
func walk(v any, path []string, ref string) (any, error) {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[p]
			if !ok {
				return nil, fmt.Errorf("{{%s}}: no member %q", ref, p)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("{{%s}}: no element %q", ref, p)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("{{%s}}: %q is not inside an object or array", ref, p)
		}
	}
	return v, nil
}
