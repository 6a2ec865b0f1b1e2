package config

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// CLITool is one [backends.NAME.tools.TOOL] table: a tool made of a
// command-line program, run without a shell for each call.
type CLITool struct {
	Name        string
	Description string
	InputSchema map[string]any    // a JSON Schema object; default {"type": "object"}
	Command     []string          // argv with {{arg}} placeholders
	Stdin       string            // template written to stdin; "" closes it at once
	Output      string            // "text" (default) | "json"
	Timeout     time.Duration     // default the backend's timeout
	Env         map[string]string // added to the daemon's environment
	Cwd         string
}

// placeholderRe matches {{name}} in command and stdin templates.
var placeholderRe = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)

// Placeholders returns the names used as {{name}} in s.
func Placeholders(s string) []string {
	var names []string
	for _, m := range placeholderRe.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	return names
}

// ExpandPlaceholders replaces every {{name}} in s with value(name).
func ExpandPlaceholders(s string, value func(name string) string) string {
	return placeholderRe.ReplaceAllStringFunc(s, func(m string) string {
		return value(placeholderRe.FindStringSubmatch(m)[1])
	})
}

func cliToolFields() []field[CLITool] {
	return []field[CLITool]{
		{"description", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.str(at, v, &t.Description, nil)
		}},
		{"input_schema", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.schema(at, v, &t.InputSchema)
		}},
		{"command", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.strList(at, v, &t.Command, nil)
		}},
		{"stdin", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.str(at, v, &t.Stdin, nil)
		}},
		{"output", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.str(at, v, &t.Output, oneOf("text", "json"))
		}},
		{"timeout", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.duration(at, v, &t.Timeout)
		}},
		{"env", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.env(at, v, &t.Env)
		}},
		{"cwd", func(d *decoder, at keyPath, v any, t *CLITool) bool {
			return d.str(at, v, &t.Cwd, nil)
		}},
	}
}

// CLIToolKeys returns the keys of a [backends.NAME.tools.TOOL] table.
func CLIToolKeys() []string {
	var keys []string
	for _, f := range cliToolFields() {
		keys = append(keys, f.key)
	}
	return keys
}

// schema stores a TOML table written as JSON Schema. It must describe an
// object, as MCP requires of a tool's inputSchema.
func (d *decoder) schema(at keyPath, v any, dst *map[string]any) bool {
	t, ok := d.table(at, v, "a table (JSON Schema)", `write input_schema = { type = "object", properties = { … }, required = [ … ] }`)
	if !ok {
		return false
	}
	if typ, set := t["type"]; set && typ != "object" {
		d.fail(at.child("type"), `an input_schema must describe an object; set type = "object"`)
		return false
	}
	if _, err := json.Marshal(t); err != nil {
		d.fail(at, "cannot be written as JSON: %v", err)
		return false
	}
	s := maps.Clone(t)
	s["type"] = "object"
	*dst = s
	return true
}

// cliTools decodes [backends.NAME.tools.TOOL] tables into b.Tools.
func (d *decoder) cliTools(at keyPath, v any, b *Backend) bool {
	t, ok := d.table(at, v, "a table of tools", "write a [backends.NAME.tools.TOOL] header for each tool")
	if !ok {
		return false
	}
	good := true
	for _, name := range slices.Sorted(maps.Keys(t)) {
		if b.Tools[name] != nil {
			d.fail(at.child(name), "tool %q is also defined in adapter_file %s; keep one definition", name, b.AdapterFile)
			good = false
			continue
		}
		if tool := d.cliTool(at.child(name), t[name], b); tool != nil {
			if b.Tools == nil {
				b.Tools = map[string]*CLITool{}
			}
			b.Tools[name] = tool
		} else {
			good = false
		}
	}
	return good
}

// cliTool decodes and checks one tool table.
func (d *decoder) cliTool(at keyPath, v any, b *Backend) *CLITool {
	name := at[len(at)-1]
	t, ok := d.table(at, v, "a table", "write the tool's keys below [backends.NAME.tools.TOOL]")
	if !ok {
		return nil
	}
	tool := &CLITool{Name: name, Output: "text", Timeout: b.Timeout, InputSchema: map[string]any{"type": "object"}}
	if !toolName.MatchString(name) {
		d.fail(at, `invalid tool name %q; use 1 to 64 letters, digits, "_", "." or "-"`, name)
		return nil
	}
	if len(decodeTable(d, at, t, cliToolFields(), tool)) > 0 {
		return nil
	}
	if len(tool.Command) == 0 || tool.Command[0] == "" {
		d.fail(at, `no command; set command = ["program", "{{argument}}", …]`)
		return nil
	}
	if len(Placeholders(tool.Command[0])) > 0 {
		d.fail(at.child("command"), "the program (the first element) may not contain a placeholder: an argument must never choose what runs")
		return nil
	}
	props, _ := tool.InputSchema["properties"].(map[string]any)
	known := slices.Sorted(maps.Keys(props))
	check := func(key, s string) bool {
		for _, p := range Placeholders(s) {
			if p == "input" && key == "stdin" {
				continue
			}
			if _, ok := props[p]; !ok {
				hint := "declare it in input_schema.properties"
				if len(known) > 0 {
					hint += " (declared: " + strings.Join(known, ", ") + ")"
				}
				d.fail(at.child(key), "placeholder {{%s}} names no argument; %s", p, hint)
				return false
			}
		}
		return true
	}
	for _, arg := range tool.Command {
		if !check("command", arg) {
			return nil
		}
	}
	if !check("stdin", tool.Stdin) {
		return nil
	}
	return tool
}

var toolName = boundedName{regexp.MustCompile(`^[A-Za-z0-9_.-]+$`), 64}

// adapterFile reads the cli tools of an adapter file: a TOML file of
// [tools.TOOL] tables, resolved relative to the file that names it.
func (d *decoder) adapterFile(at keyPath, v any, b *Backend) bool {
	var p string
	if !d.str(at, v, &p, checkNotEmpty) {
		return false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(d.f.path), p)
	}
	b.AdapterFile = p
	if _, err := os.Stat(p); err != nil {
		d.fail(at, "cannot read %s: %v; check the path (a relative one is relative to %s)", p, pathErrorReason(err), filepath.Dir(d.f.path))
		return false
	}
	f := d.l.parse(p)
	if f == nil || f.doc == nil {
		return false
	}
	ad := &decoder{l: d.l, f: f}
	good := true
	for _, k := range slices.Sorted(maps.Keys(f.doc)) {
		if k != "tools" {
			ad.unknown(keyPath{k}, []string{"tools"}, "an adapter file holds [tools.TOOL] tables only")
			good = false
		}
	}
	if tools, ok := f.doc["tools"]; ok {
		good = ad.cliTools(keyPath{"tools"}, tools, b) && good
	}
	return good
}

// checkTransport checks the keys that depend on the transport. It reports
// false when the backend is unusable.
func (d *decoder) checkTransport(at keyPath, t map[string]any, b *Backend, refused map[string]bool) bool {
	if refused["transport"] || refused["tools"] || refused["adapter_file"] {
		return false
	}
	_, hasTools := t["tools"]
	_, hasAdapter := t["adapter_file"]
	switch {
	case b.Transport != "cli" && (hasTools || hasAdapter):
		d.fail(at.child("transport"), `tools and adapter_file define command-line tools; set transport = "cli"`)
		return false
	case b.Transport == "cli" && len(b.Tools) == 0 && b.Enabled:
		d.fail(at, `a cli backend needs tools: add [backends.%s.tools.TOOL] tables or adapter_file`, b.Name)
		return false
	case b.Transport == "cli":
		if _, set := t["url"]; set {
			d.fail(at.child("url"), `a cli backend runs its tools' own commands, and url is for a remote server; remove url, or transport = "cli" and the tools`)
			return false
		}
		for _, k := range []string{"command", "args", "env", "cwd", "roots", "relay_client_requests", "requires_units", "prerequisite"} {
			if _, set := t[k]; set {
				d.fail(at.child(k), "%s is for stdio backends; a cli tool sets command, env and cwd in its own table, and runs no prerequisites", k)
				return false
			}
		}
	}
	return true
}

func cliToolsEqual(a, b map[string]*CLITool) bool {
	return maps.EqualFunc(a, b, func(x, y *CLITool) bool { return reflect.DeepEqual(x, y) })
}
