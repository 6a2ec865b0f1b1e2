package access

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
)

// ListenerResources returns, for each listener address (net.Addr.String()
// of addrs), the canonical URI of the MCP endpoint there: the audience
// access tokens must name, and the resource the RFC 9728 metadata
// serves. It is decided once, from configuration and the listeners,
// never from a request: [oauth] resource for every listener when set;
// else "http://ADDRESS" and the endpoint for a listener on a loopback
// address, and "http://localhost" and the endpoint for a unix socket (the
// URL mcpgatectl bridge uses there). A listener of any other address
// cannot name itself (its clients reach it through a name, and over
// https), so without resource it is an error that says what to set. It
// returns nil when OAuth is off.
func ListenerResources(cfg *config.Config, addrs []net.Addr) (map[string]string, error) {
	o := &cfg.OAuth
	if !o.Enabled() {
		return nil, nil
	}
	out := make(map[string]string, len(addrs))
	var bad []string
	for _, a := range addrs {
		switch {
		case o.Resource != "":
			out[a.String()] = o.Resource
		case a.Network() == "unix":
			out[a.String()] = "http://localhost" + cfg.Gateway.Endpoint
		default:
			ta, ok := a.(*net.TCPAddr)
			if !ok || !ta.IP.IsLoopback() {
				bad = append(bad, a.String())
				continue
			}
			out[a.String()] = "http://" + ta.String() + cfg.Gateway.Endpoint
		}
	}
	if len(bad) > 0 {
		where := "[oauth]"
		if o.File != "" {
			where = fmt.Sprintf("%s:%d: [oauth]", o.File, o.Line)
		}
		return nil, fmt.Errorf("%s: the gateway listens on %s, which is not a loopback address, and no resource is configured: set resource to the https:// URL clients use to reach the MCP endpoint (such as \"https://mcp.example.com%s\"), which tokens must name as their audience",
			where, strings.Join(bad, ", "), cfg.Gateway.Endpoint)
	}
	return out, nil
}

// DescribeResources says which resource is in force on which listener,
// for the start-up log and --check-config.
func DescribeResources(resources map[string]string) string {
	var parts []string
	for _, addr := range slices.Sorted(maps.Keys(resources)) {
		parts = append(parts, resources[addr]+" on "+addr)
	}
	return strings.Join(parts, "; ")
}
