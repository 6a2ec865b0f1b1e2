package daemon

import (
	"context"
	"os"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/dbusapi"
	"github.com/mcpgate/mcpgate/internal/integrity"
)

// defaultStateDirectory is where state lives when neither [gateway]
// state_directory nor systemd's $STATE_DIRECTORY says.
const defaultStateDirectory = "/var/lib/mcpgate"

// stateDirectory is the directory of the daemon's state: [gateway]
// state_directory, else the first of $STATE_DIRECTORY (set by systemd from
// StateDirectory=), else /var/lib/mcpgate.
func stateDirectory(g config.Gateway) string {
	if g.StateDirectory != "" {
		return g.StateDirectory
	}
	if dirs := os.Getenv("STATE_DIRECTORY"); dirs != "" {
		dir, _, _ := strings.Cut(dirs, ":")
		return dir
	}
	return defaultStateDirectory
}

// newIntegrity makes the integrity store of cfg.
func (d *daemon) newIntegrity(cfg *config.Config) *integrity.Store {
	s := integrity.New(stateDirectory(cfg.Gateway), d.log)
	s.Configure(cfg)
	return s
}

// pendingChanges returns the pending integrity changes of backend name as
// the D-Bus interface shows them.
func (d *daemon) pendingChanges(name string) []dbusapi.PendingChange {
	var out []dbusapi.PendingChange
	for _, c := range d.integrity.Pending(name) {
		out = append(out, dbusapi.PendingChange{Kind: string(c.Kind), Name: c.Name, Reason: c.Reason, Served: c.Served})
	}
	return out
}

// decided makes a decision about changes take effect at once: the catalog
// is rebuilt, and clients whose view changed get list_changed.
func (d *daemon) decided() {
	d.gw.Refresh()
	d.updateStatus()
}

func (g *dbusGateway) DiffChanges(name string, items []string) (string, error) {
	return g.d.integrity.Diff(name, items)
}

func (g *dbusGateway) ReviewChanges(name string, items []string) ([]dbusapi.ReviewedChange, error) {
	changes, err := g.d.integrity.Review(name, items)
	if err != nil {
		return nil, err
	}
	out := make([]dbusapi.ReviewedChange, len(changes))
	for i, c := range changes {
		out[i] = dbusapi.ReviewedChange{Kind: string(c.Kind), Name: c.Name, ID: c.ID(), Served: c.Served,
			Approvable: c.Approvable, Reason: c.Reason, Diff: c.Diff()}
	}
	return out, nil
}

func (g *dbusGateway) ApproveChanges(_ context.Context, name string, items []string) ([]string, error) {
	keys, err := g.d.integrity.Approve(name, items)
	if len(keys) > 0 {
		g.d.decided()
	}
	return keys, err
}

func (g *dbusGateway) RejectChanges(_ context.Context, name string, items []string) ([]string, error) {
	keys, err := g.d.integrity.Reject(name, items)
	if len(keys) > 0 {
		g.d.decided()
	}
	return keys, err
}

func (g *dbusGateway) ResetIntegrity(context.Context) error {
	if err := g.d.integrity.Reset(); err != nil {
		return err
	}
	g.d.decided()
	return nil
}
