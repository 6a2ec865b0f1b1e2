package backend

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/mcpgate/mcpgate/internal/clitool"
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
