package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/mcpgate/mcpgate/internal/cgroup"
	"github.com/mcpgate/mcpgate/internal/clitool"
	"github.com/mcpgate/mcpgate/internal/config"
)

// IsCLI reports whether the backend is a set of command-line tools
// (transport = "cli"): it has no child and no Conn; the gateway runs each
// call itself while the backend is healthy.
func (b *Backend) IsCLI() bool { return b.cfg.Transport == "cli" }

// cliServer is what a cli backend offers, as if a server had said so in
// its handshake: tools, whose list changes only with the configuration.
func cliServer() *ServerInfo {
	return &ServerInfo{Name: "mcpgate-cli", Capabilities: Capabilities{Tools: &ListCapability{}}}
}

// runCLI is Run for a cli backend: healthy, with its tools listed, while
// it is wanted; nothing is spawned until a tool is called.
func (b *Backend) runCLI(ctx context.Context) {
	tools := make([]json.RawMessage, 0, len(b.cfg.Tools))
	for _, name := range slices.Sorted(maps.Keys(b.cfg.Tools)) {
		tools = append(tools, clitool.ListEntry(b.cfg.Tools[name]))
	}
	up := func() {
		b.lists.Store(&Lists{Tools: tools})
		b.served.Store(b.lists.Load())
		b.setState(Healthy, func(st *Status) { st.LastError = "" })
	}
	down := func() {
		b.lists.Store(&Lists{})
		b.setState(Stopped, nil)
	}
	if b.cfg.Enabled {
		up()
	} else {
		down()
	}
	b.settle()
	for {
		select {
		case <-ctx.Done():
			down()
			return
		case cmd := <-b.cmds:
			switch cmd.op {
			case opStart, opRestart:
				up()
			case opStop:
				down()
			}
			cmd.done <- nil
		}
	}
}

// CallCLI runs the cli tool name with the arguments of a tools/call as
// clitool.Call does, with what the backend adds: the tool's env with its
// ${credential:NAME} placeholders filled in (as a child's env is), and,
// when the daemon has a delegated cgroup, a cgroup of the call's own that
// is killed when the call ends, so that nothing the program started
// outlives it. A tool the backend does not have, or a credential that
// cannot be read, is an error that names it (never a credential's value).
func (b *Backend) CallCLI(ctx context.Context, name string, args json.RawMessage, opts clitool.Options) (json.RawMessage, error) {
	tool := b.cfg.Tools[name]
	if tool == nil {
		return nil, fmt.Errorf("backend %q has no tool %q", b.name, name)
	}
	if len(tool.Env) > 0 {
		env, err := expandEnv(tool.Env, b.opts.CredentialsDirectory)
		if err != nil {
			return nil, fmt.Errorf("backend %q tool %q: %w", b.name, name, err)
		}
		expanded := *tool
		expanded.Env = env
		tool = &expanded
	}
	if tree := b.opts.Cgroups; tree != nil && opts.Cgroup == nil {
		n := b.cliRuns.Add(1)
		opts.Cgroup = func() (*cgroup.Group, error) {
			return tree.New(fmt.Sprintf("%s@cli-%d", b.name, n), config.Resources{})
		}
	}
	return clitool.Call(ctx, tool, args, opts)
}
