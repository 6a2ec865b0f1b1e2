package config

import (
	"fmt"
	"strings"
)

// Values of [gateway] runner and a backend's runner: who is the parent of a
// backend's server process.
const (
	// RunnerProcess: mcpgated spawns the server as its own child.
	RunnerProcess = "process"
	// RunnerUnit: systemd runs the server as mcpgate-backend@NAME.service,
	// started by mcpgated over D-Bus.
	RunnerUnit = "unit"
)

// runnerField is the runner key of [gateway] (every backend's default) or
// of one backend.
func runnerField[T any](runner func(*T) *string) field[T] {
	return field[T]{"runner", func(d *decoder, at keyPath, v any, t *T) bool {
		return d.str(at, v, runner(t), oneOf(RunnerProcess, RunnerUnit))
	}}
}

// UnitRunner reports whether systemd runs the backend's server in a unit
// of its own.
func (b *Backend) UnitRunner() bool {
	return b.Runner == RunnerUnit && !b.IsRemote() && b.Transport != "cli"
}

// checkUnitNames refuses a backend whose unit would be that of another
// backend's pool instance: under runner = "unit" instance N of pool NAME
// runs as mcpgate-backend@NAME-N.service.
func (l *loader) checkUnitNames(cfg *Config) {
	for _, name := range cfg.names() {
		pool := cfg.Backends[name]
		if !pool.UnitRunner() || !pool.Pooled() {
			continue
		}
		for _, other := range cfg.names() {
			b := cfg.Backends[other]
			n, isInstance := strings.CutPrefix(other, name+"-")
			if !isInstance || !b.UnitRunner() || strings.Trim(n, "0123456789") != "" || n == "" {
				continue
			}
			l.failBackend(b, "runner", fmt.Sprintf(`backend %q would run in the unit of instance %s of backend %q (instance = "session"): rename one, or give one runner = "process"`, other, n, name))
		}
	}
}
