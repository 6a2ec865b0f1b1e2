package ctl

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpgate/mcpgate/internal/dbusapi"
)

// clients prints the running gateway's clients: their sessions, when they
// were last seen and the ids of the tokens issued for them.
func (c *cli) clients([]string) int {
	return c.withClient(readTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		list, err := client.ListClients(ctx)
		if err != nil {
			return c.fail(err)
		}
		if c.opts.json {
			for i := range list {
				if list[i].Tokens == nil {
					list[i].Tokens = []string{}
				}
			}
			c.printJSON(list)
			return exitOK
		}
		if len(list) == 0 {
			fmt.Fprintln(c.stdout, "No clients are configured.")
			return exitOK
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSESSIONS\tLAST SEEN\tISSUED TOKENS\tIDENTITY\tMAY USE")
		for _, cl := range list {
			seen := "-"
			if cl.LastSeenTimestamp > 0 {
				seen = time.UnixMicro(int64(cl.LastSeenTimestamp)).Format("2006-01-02 15:04:05")
			}
			tokens := "-"
			if len(cl.Tokens) > 0 {
				tokens = strings.Join(cl.Tokens, ",")
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", cl.Name, cl.NSessions, seen, tokens, cl.Identity, cl.Policy)
		}
		tw.Flush()
		return exitOK
	})
}

// tokenAdd asks the running gateway to issue a token for a configured
// client and prints it, once.
func (c *cli) tokenAdd(name string) int {
	return c.withClient(changeTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		token, id, err := client.CreateToken(ctx, name)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(c.stdout, token)
		fmt.Fprintf(c.stderr, "issued token %s for client %q, valid now; the token above is shown only once. Revoke it with: mcpgatectl token revoke %s %s\n", id, name, name, id)
		return exitOK
	})
}

// tokenRevokeIssued asks the running gateway to revoke a token it issued.
func (c *cli) tokenRevokeIssued(name, id string) int {
	return c.withClient(changeTimeout, func(ctx context.Context, client *dbusapi.Client) int {
		if err := client.RevokeToken(ctx, name, id); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.stderr, "revoked token %s of client %q: it is refused from its next request on\n", id, name)
		return exitOK
	})
}
