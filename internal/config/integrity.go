package config

import (
	"fmt"
	"math"
	"strings"
)

// The values of the integrity key.
const (
	IntegrityPin  = "pin"  // hold back what changed until an operator approves it
	IntegrityWarn = "warn" // serve what changed, and journal it
	IntegrityOff  = "off"  // keep no baseline
)

// Integrity holds the keys of tool integrity: what mcpgate does when a
// backend's tools, prompts or resource templates differ from the approved
// baseline, and the limits every item must keep whatever the policy. Each
// may be set in [gateway] as the default of every backend, which a
// backend's own value overrides.
type Integrity struct {
	// Policy is "pin", "warn" or "off" (the code's default: a configuration
	// without the key keeps serving what it served before; the packaged
	// mcpgate.toml sets "pin").
	Policy string
	// MaxDescriptionBytes bounds the description of a tool, prompt or
	// template; default 8192.
	MaxDescriptionBytes int64
	// MaxSchemaBytes bounds each of a tool's inputSchema and outputSchema
	// as sent; default 65536.
	MaxSchemaBytes int64
}

// defaultIntegrity is the one place that knows the integrity defaults.
func defaultIntegrity() Integrity {
	return Integrity{Policy: IntegrityOff, MaxDescriptionBytes: 8192, MaxSchemaBytes: 64 << 10}
}

// integrityFields are the Integrity keys, decoding into [gateway] (the
// defaults) or [backends.NAME].
func integrityFields[T any](integrity func(*T) *Integrity) []field[T] {
	return []field[T]{
		{"integrity", func(d *decoder, at keyPath, v any, t *T) bool {
			return d.str(at, v, &integrity(t).Policy, oneOf(IntegrityPin, IntegrityWarn, IntegrityOff))
		}},
		{"max_description_bytes", func(d *decoder, at keyPath, v any, t *T) bool {
			return integer(d, at, v, &integrity(t).MaxDescriptionBytes, 64, math.MaxInt32)
		}},
		{"max_schema_bytes", func(d *decoder, at keyPath, v any, t *T) bool {
			return integer(d, at, v, &integrity(t).MaxSchemaBytes, 256, math.MaxInt32)
		}},
	}
}

// stateDirectoryField is [gateway] state_directory: where mcpgated keeps
// what must survive restarts (the integrity baseline). Empty means
// $STATE_DIRECTORY, which systemd sets from StateDirectory=, else
// /var/lib/mcpgate.
func stateDirectoryField() field[Gateway] {
	return field[Gateway]{"state_directory", func(d *decoder, at keyPath, v any, g *Gateway) bool {
		return d.str(at, v, &g.StateDirectory, checkStateDirectory)
	}}
}

func checkStateDirectory(s string) string {
	if s != "" && !strings.HasPrefix(s, "/") {
		return fmt.Sprintf("%q is not an absolute path; write one such as \"/var/lib/mcpgate\", or \"\" for systemd's StateDirectory=", s)
	}
	return ""
}
