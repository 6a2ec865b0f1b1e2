//go:build mcpgate_testhooks

package daemon

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

// testHooks installs the hooks of test builds (go build -tags
// mcpgate_testhooks, as internal/testutil builds mcpgated); production
// builds carry none (testhooks_off.go).
//
// SIGUSR2 wedges the main loop for good, so that tests can prove the
// watchdog notices: the returned channel becomes ready. SIGUSR1 collects
// garbage, returns the freed memory to the operating system and logs the
// number of goroutines ("test hook: footprint goroutines=N"), so that tests
// can compare the daemon's goroutines and RSS before and after a load
// without an endpoint that production would have to keep closed.
func (d *daemon) testHooks(ctx context.Context) <-chan struct{} {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	wedge := make(chan struct{})
	go func() {
		defer signal.Stop(sigs)
		wedged := false
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				switch {
				case sig == syscall.SIGUSR2 && !wedged:
					wedged = true
					close(wedge)
				case sig == syscall.SIGUSR1:
					runtime.GC()
					debug.FreeOSMemory()
					d.log.Info("test hook: footprint", "goroutines", runtime.NumGoroutine())
				}
			}
		}
	}()
	return wedge
}
