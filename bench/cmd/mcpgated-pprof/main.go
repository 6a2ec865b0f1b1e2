// Command mcpgated-pprof is mcpgated with net/http/pprof served on the
// address in $MCPBENCH_PPROF: the benchmark's profiling build, never
// shipped, so that the daemon itself carries no profiling hook.
package main

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"

	"github.com/mcpgate/mcpgate/internal/daemon"
)

func main() {
	if addr := os.Getenv("MCPBENCH_PPROF"); addr != "" {
		go func() {
			if err := http.ListenAndServe(addr, nil); err != nil {
				fmt.Fprintln(os.Stderr, "mcpgated-pprof:", err)
			}
		}()
	}
	os.Exit(daemon.Main(os.Args[1:]))
}
