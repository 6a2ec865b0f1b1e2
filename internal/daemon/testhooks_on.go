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
// number of goroutines and the memory held ("test hook: footprint
// goroutines=N heap_alloc=BYTES …"), so that tests
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
					debug.FreeOSMemory() // collects garbage first
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					d.log.Info("test hook: footprint", "goroutines", runtime.NumGoroutine(),
						"heap_alloc", m.HeapAlloc, "heap_held", m.HeapInuse, "stacks", m.StackInuse,
						"runtime_held", m.Sys-m.HeapReleased, "heap_sys", m.HeapSys, "gc_sys", m.GCSys, "other_sys", m.OtherSys,
						"mspan_sys", m.MSpanSys, "stack_sys", m.StackSys, "heap_released", m.HeapReleased)
				}
			}
		}
	}()
	return wedge
}
