package clitool

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Validate checks the value v (decoded JSON) against a JSON Schema. It
// checks type, required, properties, enum, minLength, maxLength, minimum,
// maximum, pattern, items and additionalProperties = false; other keywords
// are not checked. The error names the argument at fault.
func Validate(schema map[string]any, v any) error {
	return validate(schema, v, "")
}

func validate(schema map[string]any, v any, at string) error {
	name := at
	if name == "" {
		name = "the arguments"
	} else {
		name = fmt.Sprintf("argument %q", at)
	}
	if t, ok := schema["type"]; ok && !typeMatches(t, v) {
		return fmt.Errorf("%s must be of type %s, not %s", name, typeList(t), jsonType(v))
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return equalJSON(e, v) }) {
		return fmt.Errorf("%s must be one of %s", name, mustJSON(enum))
	}
	switch v := v.(type) {
	case map[string]any:
		for _, r := range asList(schema["required"]) {
			if _, ok := v[r]; !ok {
				return fmt.Errorf("missing required argument %q", join(at, r))
			}
		}
		props, _ := schema["properties"].(map[string]any)
		for k, pv := range v {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if schema["additionalProperties"] == false {
					return fmt.Errorf("unknown argument %q", join(at, k))
				}
				continue
			}
			if err := validate(ps, pv, join(at, k)); err != nil {
				return err
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range v {
				if err := validate(items, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case string:
		n := float64(len([]rune(v)))
		if m, ok := number(schema["minLength"]); ok && n < m {
			return fmt.Errorf("%s must be at least %v characters long", name, m)
		}
		if m, ok := number(schema["maxLength"]); ok && n > m {
			return fmt.Errorf("%s must be at most %v characters long", name, m)
		}
		if p, ok := schema["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("%s: the schema's pattern %q is invalid: %v", name, p, err)
			}
			if !re.MatchString(v) {
				return fmt.Errorf("%s must match %q", name, p)
			}
		}
	case float64:
		if m, ok := number(schema["minimum"]); ok && v < m {
			return fmt.Errorf("%s must be at least %v", name, m)
		}
		if m, ok := number(schema["maximum"]); ok && v > m {
			return fmt.Errorf("%s must be at most %v", name, m)
		}
	}
	return nil
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

// typeMatches reports whether v has the type t, a name or a list of names.
func typeMatches(t any, v any) bool {
	for _, name := range asList(t) {
		got := jsonType(v)
		if got == name || (name == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	default:
		return "object"
	}
}

func typeList(t any) string { return strings.Join(asList(t), " or ") }

// asList reads a string or an array of strings.
func asList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case []string:
		return v
	}
	return nil
}

// number reads a schema number, which TOML gives as int64 or float64.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

func equalJSON(a, b any) bool { return string(mustJSON(a)) == string(mustJSON(b)) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprint(v))
	}
	return b
}
