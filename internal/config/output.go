package config

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Output holds the output pipeline's settings for a backend or one of its
// tools. Zero turns a step off.
type Output struct {
	MaxOutputBytes  int64 // text items are cut to this size; 0 is off (default)
	JSONSummaryOver int64 // JSON text larger than this is summarised; 0 is off (default)
}

// ToolOutput returns the pipeline settings for the backend's tool named
// tool (its name at the backend): the backend's, with the tool's override.
func (b *Backend) ToolOutput(tool string) Output {
	if o, ok := b.ToolOverrides[tool]; ok {
		return o
	}
	return Output{MaxOutputBytes: b.MaxOutputBytes, JSONSummaryOver: b.JSONSummaryOver}
}

func outputFields() []field[Output] {
	return []field[Output]{
		{"max_output_bytes", func(d *decoder, at keyPath, v any, o *Output) bool {
			return d.byteSize(at, v, &o.MaxOutputBytes, 256)
		}},
		{"json_summary_over", func(d *decoder, at keyPath, v any, o *Output) bool {
			return d.byteSize(at, v, &o.JSONSummaryOver, 256)
		}},
	}
}

// outputBackendFields are the backend keys of the output pipeline.
func outputBackendFields() []field[Backend] {
	return []field[Backend]{
		{"max_output_bytes", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.byteSize(at, v, &b.MaxOutputBytes, 256)
		}},
		{"json_summary_over", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.byteSize(at, v, &b.JSONSummaryOver, 256)
		}},
		{"tool_overrides", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.toolOverrides(at, v, b)
		}},
	}
}

// toolOverrides decodes [backends.NAME.tool_overrides.TOOL] tables. A key
// not set in an override keeps the backend's value.
func (d *decoder) toolOverrides(at keyPath, v any, b *Backend) bool {
	t, ok := d.table(at, v, "a table of tools", "write a [backends.NAME.tool_overrides.TOOL] header for each tool")
	if !ok {
		return false
	}
	overrides := map[string]Output{}
	good := true
	for tool, tv := range t {
		tt, ok := d.table(at.child(tool), tv, "a table", "write max_output_bytes or json_summary_over below [backends.NAME.tool_overrides.TOOL]")
		if !ok {
			good = false
			continue
		}
		// The backend's own values are decoded in key order, and
		// "tool_overrides" sorts after both, so they are final here.
		o := b.ToolOutput("")
		if len(decodeTable(d, at.child(tool), tt, outputFields(), &o)) > 0 {
			good = false
		}
		overrides[tool] = o
	}
	if good {
		b.ToolOverrides = overrides
	}
	return good
}

var byteSizeRe = regexp.MustCompile(`^([0-9]+)\s*(B|KiB|MiB|GiB|kB|KB|MB|GB)?$`)

// byteSize stores a size written as an integer of bytes, "off", or a
// string such as "32KiB" or "1MiB" into dst; at least min bytes.
func (d *decoder) byteSize(at keyPath, v any, dst *int64, min int64) bool {
	const hint = `write an integer of bytes, a string such as "32KiB" or "1MiB", or "off"`
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case string:
		if v == "off" {
			*dst = 0
			return true
		}
		m := byteSizeRe.FindStringSubmatch(strings.TrimSpace(v))
		if m == nil {
			d.fail(at, "invalid size %q; %s", v, hint)
			return false
		}
		num, err := strconv.ParseInt(m[1], 10, 64)
		unit := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "kB": 1000, "KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000}[m[2]]
		if err != nil || num > math.MaxInt64/unit {
			d.fail(at, "size %q is too large", v)
			return false
		}
		n = num * unit
	default:
		d.wrongType(at, v, "a size", hint)
		return false
	}
	if n < min {
		d.fail(at, "%d bytes is too small; use at least %d, or \"off\"", n, min)
		return false
	}
	*dst = n
	return true
}
