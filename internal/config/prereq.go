package config

import (
	"regexp"
	"slices"
	"time"
)

// Prerequisite is a [backends.NAME.prerequisite] table: a process that
// must run before the backend starts.
type Prerequisite struct {
	Command      string
	Args         []string
	ProcessMatch *regexp.Regexp // a process whose cmdline matches is the prerequisite running
	Managed      bool           // mcpgate supervises it and stops it after the backend
	StartupDelay time.Duration  // wait after starting it, before the backend starts
}

// unitName is what systemd accepts as a unit name, with its suffix.
var unitName = regexp.MustCompile(`^[A-Za-z0-9:_.\\@-]+\.(service|socket|target|mount|device|path|timer|swap|automount|slice|scope)$`)

func prerequisiteBackendFields() []field[Backend] {
	return []field[Backend]{
		{"requires_units", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.strList(at, v, &b.RequiresUnits, func(s string) string {
				if !unitName.MatchString(s) {
					return `"` + s + `" is not a systemd unit name; write it with its suffix, such as "postgresql.service"`
				}
				return ""
			})
		}},
		{"prerequisite_timeout", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.PrerequisiteTimeout)
		}},
		{"prerequisite", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.prerequisite(at, v, b)
		}},
	}
}

func prerequisiteFields() []field[Prerequisite] {
	return []field[Prerequisite]{
		{"command", func(d *decoder, at keyPath, v any, p *Prerequisite) bool {
			return d.str(at, v, &p.Command, checkCommand)
		}},
		{"args", func(d *decoder, at keyPath, v any, p *Prerequisite) bool {
			return d.strList(at, v, &p.Args, nil)
		}},
		{"process_match", func(d *decoder, at keyPath, v any, p *Prerequisite) bool {
			var s string
			if !d.str(at, v, &s, checkNotEmpty) {
				return false
			}
			re, err := regexp.Compile(s)
			if err != nil {
				d.fail(at, "invalid regular expression: %v; see https://pkg.go.dev/regexp/syntax", err)
				return false
			}
			p.ProcessMatch = re
			return true
		}},
		{"managed", func(d *decoder, at keyPath, v any, p *Prerequisite) bool {
			return d.boolean(at, v, &p.Managed)
		}},
		{"startup_delay", func(d *decoder, at keyPath, v any, p *Prerequisite) bool {
			return d.duration(at, v, &p.StartupDelay)
		}},
	}
}

// PrerequisiteKeys returns the keys of a [backends.NAME.prerequisite] table.
func PrerequisiteKeys() []string {
	var keys []string
	for _, f := range prerequisiteFields() {
		keys = append(keys, f.key)
	}
	return keys
}

func (d *decoder) prerequisite(at keyPath, v any, b *Backend) bool {
	t, ok := d.table(at, v, "a table", "write a [backends.NAME.prerequisite] header with command, process_match, managed, startup_delay below it")
	if !ok {
		return false
	}
	p := &Prerequisite{}
	if len(decodeTable(d, at, t, prerequisiteFields(), p)) > 0 {
		return false
	}
	if p.Command == "" && p.ProcessMatch == nil {
		d.fail(at, "a prerequisite needs a command to start, a process_match to wait for, or both")
		return false
	}
	if p.Managed && p.Command == "" {
		d.fail(at.child("managed"), "a managed prerequisite needs a command")
		return false
	}
	b.Prerequisite = p
	return true
}

func prerequisitesEqual(a, b *Backend) bool {
	if !slices.Equal(a.RequiresUnits, b.RequiresUnits) || a.PrerequisiteTimeout != b.PrerequisiteTimeout {
		return false
	}
	p, q := a.Prerequisite, b.Prerequisite
	if p == nil || q == nil {
		return p == q
	}
	return p.Command == q.Command && slices.Equal(p.Args, q.Args) && p.Managed == q.Managed &&
		p.StartupDelay == q.StartupDelay && regexpString(p.ProcessMatch) == regexpString(q.ProcessMatch)
}

func regexpString(re *regexp.Regexp) string {
	if re == nil {
		return ""
	}
	return re.String()
}
