package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// limited returns a backend with the given call limits; rec gets a value
// at every change of its call counts.
func limited(c config.Calls, rec *testutil.Recorder[Health]) *Backend {
	var b *Backend
	b = New(&config.Backend{Name: "x", Calls: c}, Options{OnCalls: func(*Backend) { rec.Add(b.Health()) }})
	return b
}

func TestLimiterServesTheQueueInOrder(t *testing.T) {
	var rec testutil.Recorder[Health]
	b := limited(config.Calls{MaxConcurrentCalls: 1, QueueTimeout: time.Minute}, &rec)
	if err := b.lim.acquire(context.Background(), false, b); err != nil {
		t.Fatal(err)
	}
	if err := b.lim.acquire(context.Background(), false, b); !errors.Is(err, ErrWouldWait) {
		t.Fatalf("second call without waiting: %v, want ErrWouldWait", err)
	}
	admitted := make(chan string, 2)
	for i, name := range []string{"first", "second"} {
		go func() {
			if err := b.lim.acquire(context.Background(), true, b); err != nil {
				t.Error(err)
			}
			admitted <- name
		}()
		if !rec.Within(10*time.Second, func(hs []Health) bool { return len(hs) > 0 && hs[len(hs)-1].CallsQueued == i+1 }) {
			t.Fatalf("%s call never queued", name)
		}
	}
	for _, want := range []string{"first", "second"} {
		b.lim.release()
		if got := <-admitted; got != want {
			t.Fatalf("admitted %s, want %s: the queue is FIFO", got, want)
		}
	}
	if in, q := b.lim.counts(); in != 1 || q != 0 {
		t.Errorf("in flight %d, queued %d; want 1, 0", in, q)
	}
}

func TestLimiterQueueTimeoutNamesTheLimit(t *testing.T) {
	var rec testutil.Recorder[Health]
	b := limited(config.Calls{MaxConcurrentCalls: 1, QueueTimeout: 20 * time.Millisecond}, &rec)
	b.lim.acquire(context.Background(), false, b)
	err := b.lim.acquire(context.Background(), true, b)
	var refused *RefusedError
	if !errors.As(err, &refused) || !refused.Busy || !strings.Contains(err.Error(), "max_concurrent_calls = 1") || !strings.Contains(err.Error(), "1 calls in line") {
		t.Fatalf("queued past queue_timeout: %v", err)
	}
	if _, q := b.lim.counts(); q != 0 {
		t.Errorf("%d calls still queued after the timeout", q)
	}
}

func TestRateLimitRefusesAtOnce(t *testing.T) {
	var rec testutil.Recorder[Health]
	b := limited(config.Calls{RateLimit: config.RateLimit{Burst: 2, Interval: time.Hour}}, &rec)
	for range 2 {
		if err := b.lim.acquire(context.Background(), true, b); err != nil {
			t.Fatal(err)
		}
		b.lim.release()
	}
	err := b.lim.acquire(context.Background(), true, b)
	var refused *RefusedError
	if !errors.As(err, &refused) || !refused.Busy || refused.RetryAfter <= 0 || !strings.Contains(err.Error(), "rate_limit 2/1h0m0s reached") {
		t.Fatalf("third call in the hour: %v", err)
	}
}

func TestBreakerOpensAfterThresholdAndResets(t *testing.T) {
	tests := []struct {
		name   string
		checks []bool
		open   bool
	}{
		{"failures below the threshold", []bool{false, false}, false},
		{"threshold reached", []bool{false, false, false}, true},
		{"a success resets the count", []bool{false, false, true, false, false}, false},
		{"failures after opening keep it open", []bool{false, false, false, false}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(&config.Backend{Name: "x", Health: config.Health{HealthInterval: time.Second, FailureThreshold: 3, RecoveryMultiplier: 2}}, Options{})
			opened := 0
			for _, ok := range tt.checks {
				if o, _ := b.recordCheck(ok, time.Millisecond); o {
					opened++
				}
			}
			open, retryAt := b.circuitOpen()
			if open != tt.open || (open && opened != 1) {
				t.Fatalf("open %v after %d openings; want %v, once", open, opened, tt.open)
			}
			if open {
				if wait := time.Until(retryAt); wait <= time.Second || wait > 2*time.Second {
					t.Errorf("half-open check in %s, want interval × recovery_multiplier = 2s", wait)
				}
				err := b.circuitError(retryAt)
				if err.State != Unhealthy || !strings.Contains(err.Error(), `backend "x" is unhealthy`) {
					t.Errorf("circuit error %+v", err)
				}
				b.resetCircuit()
				if open, _ := b.circuitOpen(); open || b.Health().ConsecutiveFailures != 0 {
					t.Error("resetCircuit left it open")
				}
			}
		})
	}
}

// Without max_concurrent_calls and rate_limit, calls take no lock, and
// still count as in flight.
func TestUnlimitedCallsCountInFlight(t *testing.T) {
	l := newLimiter(config.Calls{})
	if !l.unlimited {
		t.Fatal("a limiter without limits is not unlimited")
	}
	for range 3 {
		if err := l.acquire(context.Background(), false, nil); err != nil {
			t.Fatal(err)
		}
	}
	l.release()
	if inflight, queued := l.counts(); inflight != 2 || queued != 0 {
		t.Errorf("counts = %d in flight, %d queued; want 2, 0", inflight, queued)
	}
}
