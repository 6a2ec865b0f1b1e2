package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestExtensionErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // one line of the errors, exactly
	}{
		{"size syntax", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\nmax_output_bytes = \"32 KB!\"\n"},
			`mcpgate.toml:3:1: backends.a.max_output_bytes: invalid size "32 KB!"; write an integer of bytes, a string such as "32KiB" or "1MiB", or "off"`},
		{"size too small", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\njson_summary_over = 10\n"},
			`mcpgate.toml:3:1: backends.a.json_summary_over: 10 bytes is too small; use at least 256, or "off"`},
		{"override key", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\n[backends.a.tool_overrides.t]\nmax_output_byte = 1000\n"},
			`mcpgate.toml:4:1: backends.a.tool_overrides.t.max_output_byte: unknown key (did you mean "max_output_bytes"?)`},
		{"tools without cli", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\ntools.t = { command = [\"true\"] }\n"},
			`mcpgate.toml:1:11: backends.a.transport: tools and adapter_file define command-line tools; set transport = "cli"`},
		{"cli without tools", map[string]string{"mcpgate.toml": "[backends.a]\ntransport = \"cli\"\n"},
			`mcpgate.toml:1:11: backends.a: a cli backend needs tools: add [backends.a.tools.TOOL] tables or adapter_file`},
		{"cli with command", map[string]string{"mcpgate.toml": "[backends.a]\ntransport = \"cli\"\ncommand = \"x\"\ntools.t = { command = [\"true\"] }\n"},
			`mcpgate.toml:3:1: backends.a.command: command is for stdio backends; a cli tool sets command, env and cwd in its own table, and runs no prerequisites`},
		{"placeholder in program", map[string]string{"mcpgate.toml": "[backends.a]\ntransport = \"cli\"\ntools.t = { command = [\"{{prog}}\"], input_schema = { properties = { prog = { type = \"string\" } } } }\n"},
			`mcpgate.toml:3:13: backends.a.tools.t.command: the program (the first element) may not contain a placeholder: an argument must never choose what runs`},
		{"unknown placeholder", map[string]string{"mcpgate.toml": "[backends.a]\ntransport = \"cli\"\ntools.t = { command = [\"echo\", \"{{x}}\"], input_schema = { properties = { y = { type = \"string\" } } } }\n"},
			`mcpgate.toml:3:13: backends.a.tools.t.command: placeholder {{x}} names no argument; declare it in input_schema.properties (declared: y)`},
		{"schema not an object", map[string]string{"mcpgate.toml": "[backends.a]\ntransport = \"cli\"\ntools.t = { command = [\"true\"], input_schema = { type = \"string\" } }\n"},
			`mcpgate.toml:3:50: backends.a.tools.t.input_schema.type: an input_schema must describe an object; set type = "object"`},
		{"adapter keys", map[string]string{"mcpgate.toml": "[backends.a]\ntransport = \"cli\"\nadapter_file = \"ad.toml\"\n", "ad.toml": "[tool.x]\ncommand = [\"true\"]\n"},
			`ad.toml:1:2: tool: unknown key (did you mean "tools"?)`},
		{"adapter missing", map[string]string{"mcpgate.toml": "[backends.a]\ntransport = \"cli\"\nadapter_file = \"nope.toml\"\n"},
			`mcpgate.toml:3:1: backends.a.adapter_file: cannot read nope.toml: no such file or directory; check the path (a relative one is relative to DIR)`},
		{"composite without steps", map[string]string{"mcpgate.toml": "[composites.c]\ndescription = \"x\"\n"},
			`mcpgate.toml:1:13: composites.c: a composite needs steps; write steps = [{ tool = "backend__tool", arguments = { … } }, …]`},
		{"composite future step", map[string]string{"mcpgate.toml": "[composites.c]\nsteps = [{ tool = \"a__b\", arguments = { x = \"{{steps.0.text}}\" } }]\n"},
			`mcpgate.toml:2:10: composites.c.steps: step 0: {{steps.0.text}}: step 0 has not run yet here; refer to an earlier step (0 to -1)`},
		{"composite undeclared input", map[string]string{"mcpgate.toml": "[composites.c]\nsteps = [{ tool = \"a__b\", arguments = { x = \"{{input.repo}}\" } }]\n"},
			`mcpgate.toml:2:10: composites.c.steps: step 0: {{input.repo}}: the input_schema declares no property "repo"`},
		{"composite step key", map[string]string{"mcpgate.toml": "[composites.c]\nsteps = [{ tool = \"a__b\", argument = {} }]\n"},
			`mcpgate.toml:2:10: composites.c.steps: step 0: unknown key "argument" (did you mean "arguments"?)`},
		{"composite result", map[string]string{"mcpgate.toml": "[composites.c]\nsteps = [{ tool = \"a__b\" }]\nresult = \"steps.3\"\n"},
			`mcpgate.toml:3:1: composites.c.result: {{steps.3}}: step 3 has not run yet here; refer to an earlier step (0 to 0)`},
		{"unit name", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\nrequires_units = [\"postgresql\"]\n"},
			`mcpgate.toml:3:19: backends.a.requires_units: "postgresql" is not a systemd unit name; write it with its suffix, such as "postgresql.service"`},
		{"process_match syntax", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\n[backends.a.prerequisite]\nprocess_match = \"(\"\n"},
			"mcpgate.toml:4:1: backends.a.prerequisite.process_match: invalid regular expression: error parsing regexp: missing closing ): `(`; see https://pkg.go.dev/regexp/syntax"},
		{"managed without command", map[string]string{"mcpgate.toml": "[backends.a]\ncommand = \"x\"\n[backends.a.prerequisite]\nprocess_match = \"x\"\nmanaged = true\n"},
			`mcpgate.toml:5:1: backends.a.prerequisite.managed: a managed prerequisite needs a command`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testutil.WriteConfigFiles(t, tt.files)
			got := errorLines(t, path)
			want := strings.ReplaceAll(tt.want, "DIR", filepath.Dir(path))
			for _, line := range got {
				if line == want {
					return
				}
			}
			t.Errorf("errors:\n%s\nwant a line:\n%s", strings.Join(got, "\n"), want)
		})
	}
}

func TestExtensionValues(t *testing.T) {
	path := testutil.WriteConfigFiles(t, map[string]string{
		"mcpgate.toml": `
[backends.a]
command = "x"
max_output_bytes = "64KiB"
json_summary_over = 4096
requires_units = ["postgresql.service"]
[backends.a.tool_overrides.big]
json_summary_over = "off"
[backends.a.prerequisite]
command = "/usr/bin/redis-server"
process_match = "^redis"
managed = true
startup_delay = "2s"

[backends.c]
transport = "cli"
timeout = "7s"
adapter_file = "adapters/x.toml"
tools.t = { command = ["echo", "{{a}}"], input_schema = { properties = { a = { type = "string" } } } }

[composites.k]
steps = [{ tool = "c__t", arguments = { a = "{{input.a}}" } }]
input_schema = { properties = { a = { type = "string" } } }
`,
		"adapters/x.toml": "[tools.u]\ncommand = [\"date\"]\noutput = \"json\"\n",
	})
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Backends["a"]
	if o := a.ToolOutput("other"); o != (Output{64 << 10, 4096}) {
		t.Errorf("backend output %+v", o)
	}
	if o := a.ToolOutput("big"); o != (Output{64 << 10, 0}) {
		t.Errorf("override output %+v, want the backend's truncation and no summary", o)
	}
	if p := a.Prerequisite; p == nil || !p.Managed || p.StartupDelay != 2*time.Second || p.ProcessMatch.String() != "^redis" || a.PrerequisiteTimeout != time.Minute {
		t.Errorf("prerequisite %+v, timeout %v", p, a.PrerequisiteTimeout)
	}
	c := cfg.Backends["c"]
	if len(c.Tools) != 2 || c.Tools["u"].Output != "json" || c.Tools["t"].Timeout != 7*time.Second || c.Tools["t"].InputSchema["type"] != "object" {
		t.Errorf("cli tools %+v", c.Tools)
	}
	if k := cfg.Composites["k"]; k == nil || len(k.Steps) != 1 || k.Steps[0].Tool != "c__t" {
		t.Errorf("composite %+v", k)
	}
	// Output settings are applied live; a change is not a restart.
	b := *a
	b.MaxOutputBytes = 1
	if !a.Equal(&b) {
		t.Error("a change of max_output_bytes makes the backend unequal (it would restart)")
	}
	b = *a
	b.RequiresUnits = nil
	if a.Equal(&b) {
		t.Error("a change of requires_units goes unnoticed")
	}
}
