package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/config"
)

// processBackends returns the enabled backends whose servers or programs
// mcpgated spawns itself (runner = "process", and cli backends, whose
// calls each get a cgroup), and those of them with limits.
func processBackends(cfg *config.Config) (all, limited []*config.Backend) {
	for _, b := range cfg.EnabledBackends() {
		if b.Transport == "cli" {
			all = append(all, b)
			continue
		}
		if b.IsRemote() || b.UnitRunner() {
			continue
		}
		all = append(all, b)
		if b.Limited() {
			limited = append(limited, b)
		}
	}
	return all, limited
}

// limitsError says which backends set limits that cannot apply, and why.
func limitsError(limited []*config.Backend, err error) error {
	names := make([]string, len(limited))
	for i, b := range limited {
		names[i] = fmt.Sprintf("%q (%s:%d)", b.Name, b.File, b.Line)
	}
	return fmt.Errorf("backend %s sets resource limits, which under runner = \"process\" need a cgroup delegated to mcpgated: %w", strings.Join(names, ", "), err)
}

// resources returns the limits of bs.
func resources(bs []*config.Backend) []config.Resources {
	rs := make([]config.Resources, len(bs))
	for i, b := range bs {
		rs[i] = b.Resources
	}
	return rs
}

// checkCgroups is --check-config's view of openCgroups: it refuses limits
// that the cgroup this command runs in could not apply, changing nothing.
func checkCgroups(cfg *config.Config) error {
	_, limited := processBackends(cfg)
	if len(limited) == 0 {
		return nil
	}
	if err := cgroup.Check(resources(limited)...); err != nil {
		return fmt.Errorf("%w (checked in the cgroup this command runs in)", limitsError(limited, err))
	}
	return nil
}

// openCgroups takes over the daemon's delegated cgroup when some backend
// is spawned by the daemon, so that each child gets a cgroup of its own
// (limits, usage, cgroup.kill). Without delegation the children run in the
// daemon's cgroup as before, unless a backend sets limits: then start-up
// is refused with how to get delegation.
func (d *daemon) openCgroups() error {
	all, limited := processBackends(d.cfg)
	if len(all) == 0 {
		return nil
	}
	tree, err := cgroup.Open()
	switch {
	case err != nil && len(limited) > 0:
		return limitsError(limited, err)
	case errors.Is(err, cgroup.ErrNotDelegated):
		d.log.Debug("backends run in mcpgated's own cgroup", "reason", err)
		return nil
	case err != nil:
		d.log.Warn("backends run in mcpgated's own cgroup", "err", err)
		return nil
	}
	if err := tree.Check(resources(limited)...); err != nil {
		return limitsError(limited, err)
	}
	d.log.Debug("each backend's server runs in a cgroup of its own", "cgroup", tree.Dir())
	d.cgroups = tree
	return nil
}

// checkReloadCgroups refuses a configuration whose limits the cgroups the
// daemon started with cannot apply.
func (d *daemon) checkReloadCgroups(cfg *config.Config) error {
	_, limited := processBackends(cfg)
	switch {
	case len(limited) == 0:
		return nil
	case d.cgroups == nil:
		return limitsError(limited, fmt.Errorf("mcpgated started without one; %s, then restart it", cgroup.HowToDelegate))
	}
	if err := d.cgroups.Check(resources(limited)...); err != nil {
		return limitsError(limited, err)
	}
	return nil
}
