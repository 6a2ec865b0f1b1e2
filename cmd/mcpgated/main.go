// Command mcpgated is the mcpgate daemon: a systemd-native gateway that runs
// MCP servers as supervised children and serves them over Streamable HTTP.
package main

import (
	"os"

	"github.com/mcpgate/mcpgate/internal/daemon"
)

func main() { os.Exit(daemon.Main(os.Args[1:])) }
