package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// pendingJSON is one line of "integrity list --json".
type pendingJSON struct {
	Backend string `json:"backend"`
	dbusapi.PendingChange
}

// integrity runs "mcpgatectl integrity list|diff|approve|reject|reset".
func (c *cli) integrity(args []string) int {
	if len(args) == 0 {
		return c.usageError(errors.New("integrity takes list, diff BACKEND [ITEM...], approve BACKEND ID..., reject BACKEND ID... or reset"))
	}
	sub, args := args[0], args[1:]
	pos, err := parseInterleaved(c.flagSet("mcpgatectl integrity "+sub), args)
	if err != nil {
		return c.usageError(err)
	}
	switch {
	case sub == "list" && len(pos) <= 1:
		return c.integrityList(pos)
	case (sub == "diff" || sub == "approve" || sub == "reject") && len(pos) >= 1:
		return c.integrityDecide(sub, pos[0], pos[1:])
	case sub == "reset" && len(pos) == 0:
		return c.integrityReset()
	}
	return c.usageError(fmt.Errorf("integrity takes list [BACKEND], diff BACKEND [ITEM...], approve BACKEND ID..., reject BACKEND ID... or reset"))
}

// integrityList prints the pending changes of every backend, or of one.
func (c *cli) integrityList(pos []string) int {
	return c.withClient(readTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		var names []string
		if len(pos) == 1 {
			names = pos
		} else {
			refs, err := client.ListBackends(ctx)
			if err != nil {
				return c.fail(err)
			}
			for _, r := range refs {
				names = append(names, r.Name)
			}
		}
		rows := []pendingJSON{}
		for _, name := range names {
			changes, err := client.PendingChanges(ctx, name)
			if dbusapi.ErrorName(err) == dbusapi.ErrorNoSuchBackend && len(pos) == 0 {
				continue // removed by a reload meanwhile
			}
			if err != nil {
				return c.fail(err)
			}
			for _, ch := range changes {
				rows = append(rows, pendingJSON{name, ch})
			}
		}
		if c.opts.json {
			c.printJSON(rows)
			return exitOK
		}
		printPending(c.stdout, rows)
		return exitOK
	})
}

func printPending(w io.Writer, rows []pendingJSON) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "No pending changes: every backend serves what was approved.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tKIND\tNAME\tSTATE\tREASON")
	for _, r := range rows {
		state := "held back"
		if r.Served {
			state = "served (warn)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Backend, r.Kind, shown(r.Name), state, r.Reason)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nReview with `mcpgatectl integrity diff BACKEND [ITEM]`, then approve or reject.")
}

// shown quotes a name that holds characters a terminal would not show.
func shown(name string) string {
	for _, r := range name {
		if !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) {
			return strconv.QuoteToASCII(name)
		}
	}
	return name
}

// integrityDecide shows, approves or rejects a backend's pending changes.
func (c *cli) integrityDecide(verb, name string, items []string) int {
	timeout := changeTimeout
	if verb == "diff" {
		timeout = readTimeout
	}
	return c.withClient(timeout, func(ctx context.Context, client *dbusapi.Client) int {
		var keys []string
		var err error
		switch verb {
		case "diff":
			var d string
			if d, err = client.DiffChanges(ctx, name, items); err == nil {
				fmt.Fprint(c.stdout, d)
				return exitOK
			}
		case "approve":
			keys, err = client.ApproveChanges(ctx, name, items)
		case "reject":
			keys, err = client.RejectChanges(ctx, name, items)
		}
		if err != nil {
			return c.fail(err)
		}
		done := map[string]string{"approve": "approved", "reject": "rejected"}[verb]
		for _, k := range keys {
			fmt.Fprintf(c.stdout, "%s %s\n", done, shown(k))
		}
		return exitOK
	})
}

func (c *cli) integrityReset() int {
	return c.withClient(changeTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		if err := client.ResetIntegrity(ctx); err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(c.stdout, "The unreadable state file was moved aside; a new baseline is recorded from what the backends offer now.")
		return exitOK
	})
}

// pendingSummary is the Integrity line of "status NAME".
func pendingSummary(b dbusapi.BackendStatus) string {
	held := 0
	for _, p := range b.PendingChanges {
		if !p.Served {
			held++
		}
	}
	return fmt.Sprintf("%d changes pending review, %d held back (mcpgatectl integrity diff %s)", len(b.PendingChanges), held, b.Name)
}

// printPendingSummary adds a line to the overview when changes wait for
// review.
func printPendingSummary(w io.Writer, backends []dbusapi.BackendStatus) {
	var parts []string
	n := 0
	for _, b := range backends {
		if len(b.PendingChanges) > 0 {
			n += len(b.PendingChanges)
			parts = append(parts, fmt.Sprintf("%s: %d", b.Name, len(b.PendingChanges)))
		}
	}
	if n > 0 {
		fmt.Fprintf(w, "\nPending changes: %d (%s); see `mcpgatectl integrity list`\n", n, strings.Join(parts, ", "))
	}
}
