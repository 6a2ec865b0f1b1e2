package daemon

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/supervisor"
)

// clientChange says which clients a reload added, removed or changed, for
// the reload's summary: "clients added ci; clients changed local", or ""
// when the clients are as they were. A client moved to another file or
// line is not changed.
func clientChange(before, after map[string]*config.Client) string {
	var added, removed, changed []string
	for name, c := range after {
		old, ok := before[name]
		switch {
		case !ok:
			added = append(added, name)
		case !sameClient(old, c):
			changed = append(changed, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			removed = append(removed, name)
		}
	}
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", added}, {"removed", removed}, {"changed", changed}} {
		if len(p.names) > 0 {
			slices.Sort(p.names)
			parts = append(parts, fmt.Sprintf("clients %s %s", p.what, strings.Join(p.names, ", ")))
		}
	}
	return strings.Join(parts, "; ")
}

// sameClient compares two clients but for where they are defined.
func sameClient(a, b *config.Client) bool {
	x, y := *a, *b
	x.File, x.Line, y.File, y.Line = "", 0, "", 0
	return reflect.DeepEqual(x, y)
}

// catalogNames are the names of cat a policy can match.
func catalogNames(cat *catalog.Catalog) access.Names {
	var n access.Names
	for _, e := range cat.Tools {
		n[access.Tools] = append(n[access.Tools], e.Name)
	}
	for _, e := range cat.Prompts {
		n[access.Prompts] = append(n[access.Prompts], e.Name)
	}
	for _, list := range [][]catalog.Resource{cat.Resources, cat.Templates} {
		for _, r := range list {
			n[access.Resources] = append(n[access.Resources], r.URI)
		}
	}
	return n
}

// warnUnmatchedOnceSettled calls warnUnmatched, for the clients the reload
// just applied, once the backends the reload started (change's added and
// restarted ones) have finished their first handshake or failed it: the
// reload does not wait for them, and a pattern for a new backend's tools
// matches nothing until that backend is in the catalog. A later reload
// cancels the warning still waiting; so do stop (the backends that settle
// by being shut down have nothing to say) and the daemon's end.
func (d *daemon) warnUnmatchedOnceSettled(ctx context.Context, change supervisor.Change) {
	if d.cancelUnmatched != nil {
		d.cancelUnmatched()
	}
	var started []*backend.Backend
	for _, name := range slices.Concat(change.Added, change.Restarted) {
		if b := d.sup.Backend(name); b != nil {
			started = append(started, b)
		}
	}
	clients := d.cfg.Clients
	ctx, d.cancelUnmatched = context.WithCancel(ctx)
	go func() {
		if supervisor.WaitSettled(ctx, started) == nil && ctx.Err() == nil {
			d.warnUnmatched(clients)
		}
	}()
}

// warnUnmatched warns, after a reload, about each pattern of a client's
// policy that matches nothing in the catalog: a typo shows a client
// nothing, silently.
func (d *daemon) warnUnmatched(clients map[string]*config.Client) {
	for _, u := range access.UnmatchedPatterns(clients, catalogNames(d.gw.Catalog())) {
		c := clients[u.Client]
		d.log.Warn(fmt.Sprintf("%s (%s:%d); the catalog has the tools, prompts and resources of the backends that are running", u, c.File, c.Line),
			"client", u.Client)
	}
}
