package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Bounds of a summary, so that a summary of a huge document stays small.
const (
	sampleItems  = 3   // items kept of an array of uniform objects
	outlineLines = 200 // lines of a key-path outline
	outlineDepth = 8   // nesting levels an outline descends
)

// Summarize describes the JSON document text briefly. An array of objects
// that all have the same keys becomes its first 3 items and its length;
// any other value becomes an outline of its key paths with their types and
// sizes. It reports false if text is not JSON.
func Summarize(text []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return "", false
	}
	if arr, ok := v.([]any); ok && uniformObjects(arr) {
		n := min(len(arr), sampleItems)
		head := mustMarshal(map[string]any{
			"mcpgateSummary": fmt.Sprintf("an array of %d objects with the same keys, of %d bytes; the first %d follow", len(arr), len(text), n),
			"count":          len(arr),
			"first":          arr[:n],
		})
		return string(head), true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mcpgate summary of a JSON document of %d bytes (key path: type and size):\n", len(text))
	lines := 0
	outline(&b, "$", v, 0, &lines)
	if lines >= outlineLines {
		fmt.Fprintf(&b, "… (outline cut at %d lines)\n", outlineLines)
	}
	return b.String(), true
}

// uniformObjects reports whether arr is a non-empty array of objects with
// one set of keys.
func uniformObjects(arr []any) bool {
	if len(arr) == 0 {
		return false
	}
	var keys []string
	for i, e := range arr {
		obj, ok := e.(map[string]any)
		if !ok {
			return false
		}
		k := slices.Sorted(maps.Keys(obj))
		if i == 0 {
			keys = k
		} else if !slices.Equal(keys, k) {
			return false
		}
	}
	return true
}

// outline writes one line per key path of v: its type and size. The
// elements of an array are outlined once, as path[], from the first one.
func outline(b *strings.Builder, path string, v any, depth int, lines *int) {
	if *lines >= outlineLines {
		return
	}
	*lines++
	switch v := v.(type) {
	case map[string]any:
		fmt.Fprintf(b, "%s: object, %d keys\n", path, len(v))
		if depth >= outlineDepth {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			outline(b, path+"."+k, v[k], depth+1, lines)
		}
	case []any:
		fmt.Fprintf(b, "%s: array, %d items\n", path, len(v))
		if len(v) > 0 && depth < outlineDepth {
			outline(b, path+"[]", v[0], depth+1, lines)
		}
	case string:
		fmt.Fprintf(b, "%s: string, %d bytes\n", path, len(v))
	case json.Number:
		fmt.Fprintf(b, "%s: number\n", path)
	case bool:
		fmt.Fprintf(b, "%s: boolean\n", path)
	default:
		fmt.Fprintf(b, "%s: null\n", path)
	}
}
