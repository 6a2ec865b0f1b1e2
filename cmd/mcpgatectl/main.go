// Command mcpgatectl controls a running mcpgate daemon.
package main

import (
	"os"

	"github.com/mcpgate/mcpgate/internal/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:])) }
