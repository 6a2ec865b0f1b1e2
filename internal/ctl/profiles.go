package ctl

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// printProfiles prints the endpoint and its profiles: how each is served,
// how many tools it serves and what its tools/list costs. Nothing is
// printed when no profile is configured.
func printProfiles(w io.Writer, profiles []dbusapi.ProfileStatus) {
	if len(profiles) < 2 {
		return
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tMODE\tTOOLS\tTOOLS/LIST\tDESCRIPTION")
	for _, p := range profiles {
		name, mode := p.Name, "list"
		if name == "" {
			name = "(endpoint)"
		}
		if p.Search {
			mode = "search"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", name, mode, p.NTools, iecBytes(uint64(p.ListBytes)), oneLine(p.Description))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight("  "+line, " "))
	}
}
