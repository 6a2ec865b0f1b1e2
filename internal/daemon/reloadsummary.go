package daemon

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
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
