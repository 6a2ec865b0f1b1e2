// Package gateways knows how to start each gateway the benchmark compares,
// in front of a given stdio backend, as its documentation says to.
package gateways

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/bench/internal/load"
	"github.com/mcpgate/mcpgate/bench/internal/proc"
)

// Env is where the binaries are.
type Env struct {
	Bin  string // mcpgated, benchfloor, benchecho, mcpgate-demoserver
	NPM  string // the directory holding node_modules with the Node peers
	Node string // the node binary
	Work string // a scratch directory for config files
	Log  io.Writer
}

// Gateway is one kind of gateway.
type Gateway struct {
	Name string
	// PerSessionChild is set for gateways that spawn one backend process
	// per session.
	PerSessionChild bool
	argv            func(e *Env, port int, backend []string) ([]string, error)
	env             []string
	// Token is the bearer token its sessions send; "" for none.
	Token string
}

// All returns the gateways in the order of the tables: the floor, mcpgate,
// then the Node peers.
func All() []*Gateway {
	return []*Gateway{
		{Name: "floor", argv: floor},
		{Name: "mcpgate", argv: mcpgate},
		{Name: "supergateway", argv: supergateway, PerSessionChild: true},
		{Name: "mcp-proxy", argv: mcpProxy},
	}
}

// Running is a started gateway.
type Running struct {
	*Gateway
	URL  string
	Proc *proc.Proc
}

// Start runs g in front of backend on a free port and waits until a
// session can call the echo tool.
func (g *Gateway) Start(ctx context.Context, e *Env, group *proc.Group, backend []string) (*Running, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	argv, err := g.argv(e, port, backend)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.Name, err)
	}
	p, err := group.Start(g.Name, argv, g.env, e.Log)
	if err != nil {
		return nil, err
	}
	r := &Running{Gateway: g, URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Proc: p}
	if err := load.ProbeToken(ctx, r.URL, g.Token, 30*time.Second); err != nil {
		group.Stop(p)
		return nil, fmt.Errorf("%s: %w", g.Name, err)
	}
	return r, nil
}

// FreePort returns a TCP port on the loopback that is free now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func floor(e *Env, port int, backend []string) ([]string, error) {
	return append([]string{filepath.Join(e.Bin, "benchfloor"), "-listen", fmt.Sprintf("127.0.0.1:%d", port), "--"}, backend...), nil
}

// MCPGateConfig returns an mcpgated configuration serving addr with the
// given backends, each running argv.
func MCPGateConfig(listen string, backends int, argv []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `[gateway]
listen = [%q]
bus = "none"
# The peers take no credentials either; with a token mcpgate would also
# compare it per request (under a microsecond).
auth = "none"
# The peers bound neither sessions nor requests in flight; the idle
# scenario holds up to 20000 sessions and the largest load 256 calls at
# once.
max_sessions = 32768
max_concurrent_requests = 1024
log_target = "stderr"
log_level = "warn"
# The 50 MB result must fit in one message.
max_message_bytes = %d
`, listen, 128<<20)
	for i := range backends {
		fmt.Fprintf(&b, "\n[backends.b%03d]\ncommand = %q\nargs = [", i, argv[0])
		for j, a := range argv[1:] {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", a)
		}
		b.WriteString("]\n")
		if backends == 1 {
			b.WriteString("tool_prefix = \"\"\n")
		}
	}
	return b.String()
}

// MCPGateRemote is mcpgate in front of one remote backend at url (http://
// or unix:SOCKET:PATH) instead of a stdio one, under name; the backend
// argument of Start is not used.
func MCPGateRemote(name, url string) *Gateway {
	return &Gateway{Name: name, argv: func(e *Env, port int, _ []string) ([]string, error) {
		cfg := filepath.Join(e.Work, "mcpgate-"+strconv.Itoa(port)+".toml")
		text := MCPGateConfig(fmt.Sprintf("127.0.0.1:%d", port), 0, nil) + fmt.Sprintf("\n[backends.remote]\nurl = %q\ntool_prefix = \"\"\n", url)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			return nil, err
		}
		return []string{filepath.Join(e.Bin, "mcpgated"), "--config", cfg}, nil
	}}
}

func mcpgate(e *Env, port int, backend []string) ([]string, error) {
	cfg := filepath.Join(e.Work, "mcpgate-"+strconv.Itoa(port)+".toml")
	if err := os.WriteFile(cfg, []byte(MCPGateConfig(fmt.Sprintf("127.0.0.1:%d", port), 1, backend)), 0o644); err != nil {
		return nil, err
	}
	return []string{filepath.Join(e.Bin, "mcpgated"), "--config", cfg}, nil
}

// Profiled returns g, one of mcpgate's configurations, as its profiling
// build (bench/cmd/mcpgated-pprof) runs it, serving net/http/pprof on
// addr.
func Profiled(g *Gateway, addr string) *Gateway {
	p := Built(g, g.Name, "mcpgated-pprof")
	p.env = append(append([]string(nil), g.env...), "MCPBENCH_PPROF="+addr)
	return p
}

// Built returns g, one of mcpgate's configurations, run by another build
// of mcpgated, binary (relative to the binaries' directory unless
// absolute), under name.
func Built(g *Gateway, name, binary string) *Gateway {
	p := *g
	p.Name = name
	p.argv = func(e *Env, port int, backend []string) ([]string, error) {
		argv, err := g.argv(e, port, backend)
		if err == nil {
			argv[0] = binary
			if !filepath.IsAbs(binary) {
				argv[0] = filepath.Join(e.Bin, binary)
			}
		}
		return argv, err
	}
	return &p
}

// supergateway in its documented stateful Streamable HTTP mode; logging is
// off, as mcpgate's is at warn.
func supergateway(e *Env, port int, backend []string) ([]string, error) {
	return []string{e.Node, filepath.Join(e.NPM, "node_modules/supergateway/dist/index.js"),
		"--stdio", shellJoin(backend), "--outputTransport", "streamableHttp", "--stateful",
		"--port", strconv.Itoa(port), "--logLevel", "none"}, nil
}

// mcp-proxy with only its Streamable HTTP endpoint (/mcp).
func mcpProxy(e *Env, port int, backend []string) ([]string, error) {
	return append([]string{e.Node, filepath.Join(e.NPM, "node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs"),
		"--port", strconv.Itoa(port), "--host", "127.0.0.1", "--server", "stream", "--"}, backend...), nil
}

func shellJoin(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
