package scaleout

import (
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// BenchmarkThroughput measures calls through HAProxy to three hosts
// against calls to one host directly, 50 sessions at once, in the lab of
// TestScaleOutBehindHAProxy. One op is one tools/call answered; make bench
// reports it (make bench-scaleout), nothing asserts it: on a machine whose
// cores the hosts share, three hosts cannot be faster than one.
func BenchmarkThroughput(b *testing.B) {
	if os.Geteuid() != 0 {
		testutil.Unavailable(b, "network namespaces need root")
	}
	l := newLab(b, nHosts)
	hosts := startHosts(b, l)
	startHAProxy(b, l)
	hc := &http.Client{Transport: &http.Transport{DialContext: dialIn(b, l.lb), MaxIdleConnsPerHost: nSessions * 2}, Timeout: wait}
	b.Cleanup(hc.CloseIdleConnections)
	for _, tc := range []struct{ name, url string }{
		{"haproxy-3-hosts", "http://" + lbAddr + ":" + port + "/mcp"},
		{"direct-1-host", "http://" + hosts[0].addr + ":" + port + "/mcp"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sessions := make([]*session, nSessions)
			for i := range sessions {
				sessions[i] = &session{hc: hc, url: tc.url}
				if out := sessions[i].initialize(b.Context()); sessions[i].id == "" {
					b.Fatalf("initialize: %s", out)
				}
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for _, s := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if text, _ := s.call(b.Context(), "fake__hostname", "{}"); text == "" {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Errorf("%d of %d calls failed", n, b.N)
			}
		})
	}
}
