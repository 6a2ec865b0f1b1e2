package daemon

import (
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/listeners"
)

// credentialsDirectory is where ${credential:NAME} and token_credential
// are read.
func (d *daemon) credentialsDirectory() string {
	return config.CredentialsDirectory(d.cfg.Gateway.CredentialsDirectory)
}

// loadClients builds the clients of cfg and makes them the ones in effect.
// A client that cannot be recognised (unreadable credential, unknown user)
// is logged: it matches nobody until the next reload.
func (d *daemon) loadClients(cfg *config.Config) *access.Set {
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	d.pruneIssued(slices.Collect(maps.Keys(cfg.Clients)))
	set, warnings := access.NewSet(cfg, access.Options{
		CredentialsDirectory: config.CredentialsDirectory(cfg.Gateway.CredentialsDirectory),
		Previous:             d.clients.Load(),
		Issued:               d.issued,
		Resources:            d.resources,
	})
	for _, w := range warnings {
		d.log.Warn(w)
	}
	d.clients.Store(set)
	return set
}

// decideResources fixes the OAuth resource of each listener, once, and
// says which is in force where.
func (d *daemon) decideResources() error {
	var addrs []net.Addr
	for _, l := range d.lns.Listeners {
		addrs = append(addrs, l.Addr())
	}
	resources, err := access.ListenerResources(d.cfg, addrs)
	if err != nil {
		return err
	}
	d.resources = resources
	if resources != nil {
		d.log.Info("OAuth: access tokens must name the resource "+access.DescribeResources(resources), "resources", access.DescribeResources(resources))
	}
	return nil
}

// checkResources is --check-config's view of decideResources, on the
// configured listen addresses: the sockets systemd passes in are known
// only when mcpgated starts.
func checkResources(cfg *config.Config, stdout io.Writer) error {
	var addrs []net.Addr
	for _, l := range cfg.Gateway.Listen {
		if path, ok := strings.CutPrefix(l, listeners.UnixPrefix); ok {
			addrs = append(addrs, &net.UnixAddr{Name: path, Net: "unix"})
			continue
		}
		a, err := net.ResolveTCPAddr("tcp", l)
		if err != nil {
			return fmt.Errorf("listen address %q: %v", l, err)
		}
		addrs = append(addrs, a)
	}
	resources, err := access.ListenerResources(cfg, addrs)
	if err != nil {
		return err
	}
	if resources != nil {
		fmt.Fprintf(stdout, "OAuth resource: %s (under socket activation, on the sockets systemd passes in instead: see the start-up log)\n", access.DescribeResources(resources))
	}
	return nil
}

// warnAccess says at start who can reach the gateway when that is more
// than the configuration's clients, or nobody at all.
func (d *daemon) warnAccess() {
	set := d.clients.Load()
	if !set.Required() {
		var who []string
		for _, l := range d.lns.Listeners {
			who = append(who, reach(l.Addr()))
		}
		d.log.Warn(`auth = "none": every caller is client "anonymous" and may use every tool with the backends' credentials; reachable by `+strings.Join(who, "; "),
			journal.MessageAuthNone.Attr())
		return
	}
	if len(set.Names()) == 0 {
		d.log.Warn(`no [clients.NAME] is configured, so every caller is refused; add one (the packaged configuration has client "local" for the unix socket), or create a token with "mcpgatectl token create NAME"`)
	}
}

// reach describes who can connect to a listening address.
func reach(a net.Addr) string {
	if a.Network() == "unix" {
		st, err := os.Stat(a.String())
		if err != nil {
			return "unix socket " + a.String()
		}
		return fmt.Sprintf("every local user who may open unix socket %s (mode %04o)", a.String(), st.Mode().Perm())
	}
	if ta, ok := a.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return "every local user and every program on this machine (including web pages a browser loads from localhost) at " + a.String()
	}
	return "everyone who can reach " + a.String() + " over the network"
}

// maxExcerpt is how much of a message body a debug log entry shows.
const maxExcerpt = 256

// excerpt returns the start of a message body for a debug log entry.
func excerpt(body []byte) string {
	if len(body) <= maxExcerpt {
		return string(body)
	}
	return string(body[:maxExcerpt]) + fmt.Sprintf("… (%d bytes)", len(body))
}
