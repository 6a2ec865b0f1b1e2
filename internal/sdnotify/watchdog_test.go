package sdnotify

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestWatchdogFromEnv(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		name     string
		usec     string // "-" = unset
		pid      string // "-" = unset
		interval time.Duration
		wantErr  string
	}{
		{name: "unset", usec: "-", pid: "-"},
		{name: "for us", usec: "30000000", pid: self, interval: 30 * time.Second},
		{name: "no pid", usec: "2500", pid: "-", interval: 2500 * time.Microsecond},
		{name: "other process", usec: "30000000", pid: "1"},
		{name: "garbage usec", usec: "30s", pid: self, wantErr: "WATCHDOG_USEC"},
		{name: "zero usec", usec: "0", pid: self, wantErr: "WATCHDOG_USEC"},
		{name: "garbage pid", usec: "30000000", pid: "me", wantErr: "WATCHDOG_PID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range map[string]string{"WATCHDOG_USEC": tt.usec, "WATCHDOG_PID": tt.pid} {
				t.Setenv(k, v)
				if v == "-" {
					os.Unsetenv(k)
				}
			}
			w, err := WatchdogFromEnv(nil, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want one naming %s", err, tt.wantErr)
				}
			} else if err != nil {
				t.Errorf("err = %v", err)
			}
			if got := w.Interval(); got != tt.interval {
				t.Errorf("Interval() = %v, want %v", got, tt.interval)
			}
			for _, k := range []string{"WATCHDOG_USEC", "WATCHDOG_PID"} {
				if v, ok := os.LookupEnv(k); ok {
					t.Errorf("%s=%q still set; children would inherit it", k, v)
				}
			}
		})
	}
}

func TestWatchdogDisabledReturns(t *testing.T) {
	for name, w := range map[string]*Watchdog{"nil": nil, "zero": NewWatchdog(New("", nil), 0, nil)} {
		t.Run(name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				w.Run(context.Background(), func(context.Context) error { return nil })
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(waitFor):
				t.Fatal("Run of a disabled watchdog did not return")
			}
		})
	}
}

// scriptedCheck is a liveness check whose every answer the test gives.
type scriptedCheck struct {
	answers chan func(ctx context.Context) error
}

func (c *scriptedCheck) alive(ctx context.Context) error {
	select {
	case answer := <-c.answers:
		return answer(ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer hands the check's next call its answer and returns once that call has
// taken it. Every notification of earlier calls has been sent by then: Run
// pets before it calls the check again.
func (c *scriptedCheck) answer(t *testing.T, f func(ctx context.Context) error) {
	t.Helper()
	select {
	case c.answers <- f:
	case <-time.After(waitFor):
		t.Fatal("watchdog did not call the liveness check")
	}
}

func pass(context.Context) error { return nil }
func fail(context.Context) error { return errors.New("supervisor loop wedged") }

// late ignores its deadline and claims success afterwards.
func late(ctx context.Context) error { <-ctx.Done(); return nil }

// runWatchdog runs w until the test ends; the returned channel closes when
// Run returns.
func runWatchdog(t *testing.T, ctx context.Context, w *Watchdog, alive func(context.Context) error) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, alive)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return done
}

func TestWatchdogPetsOnlyWhileAlive(t *testing.T) {
	sock := listenNotify(t)
	h := &testutil.LogRecorder{}
	// The interval only sets the check deadline (interval/4) here: the test
	// paces the rounds with its own ticker, so no deadline can pass while the
	// test is slow.
	const interval = time.Minute
	w := NewWatchdog(New(sock.addr, nil), interval, slog.New(h))
	tick := make(chan time.Time)
	period := make(chan time.Duration, 1)
	w.newTicker = func(p time.Duration) (<-chan time.Time, func()) {
		period <- p
		return tick, func() {}
	}
	c := &scriptedCheck{answers: make(chan func(context.Context) error)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runWatchdog(t, ctx, w, c.alive)

	if p := <-period; p != interval/2 {
		t.Errorf("ticker period %v, want half the interval (%v)", p, interval/2)
	}
	nextRound := func() {
		t.Helper()
		select {
		case tick <- time.Now():
		case <-time.After(waitFor):
			t.Fatal("watchdog is not waiting for its ticker")
		}
	}

	// Alive: petted at once, before the first tick.
	c.answer(t, pass)
	if got := sock.next(t); got != "WATCHDOG=1" {
		t.Fatalf("got %q, want WATCHDOG=1", got)
	}
	// Wedged for two rounds: no pets.
	for range 2 {
		nextRound()
		c.answer(t, fail)
	}
	nextRound()
	c.answer(t, pass) // the second failing round is over
	if got := sock.next(t); got != "WATCHDOG=1" {
		t.Fatalf("got %q after recovery, want WATCHDOG=1", got)
	}
	// Had either failing round petted, its datagram would have been queued
	// before the one just read.
	sock.expectNone(t)

	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return after its context ended")
	}
	msgs := h.Messages()
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "ERROR ") || !strings.Contains(msgs[0], "supervisor loop wedged") ||
		!strings.HasPrefix(msgs[1], "INFO ") {
		t.Errorf("log %q: want one error for the two failed rounds, then one recovery message", msgs)
	}
}

func TestWatchdogLateAnswerFails(t *testing.T) {
	sock := listenNotify(t)
	h := &testutil.LogRecorder{}
	// The ticker and the deadlines are the test's, so the rounds are
	// counted exactly and no deadline passes because the test is slow: the
	// first round's deadline has passed when it starts, the second's never
	// comes.
	w := NewWatchdog(New(sock.addr, nil), time.Minute, slog.New(h))
	tick := make(chan time.Time)
	w.newTicker = func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} }
	rounds := 0
	w.withTimeout = func(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
		if d != time.Minute/4 {
			t.Errorf("a round's deadline is %v after it starts, want a quarter of the interval (%v)", d, time.Minute/4)
		}
		if rounds++; rounds == 1 {
			return context.WithDeadline(ctx, time.Now().Add(-time.Second))
		}
		return context.WithCancel(ctx)
	}
	checked := make(chan error, 1)
	calls := 0
	alive := func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return late(ctx)
		}
		checked <- nil
		return nil
	}
	runWatchdog(t, context.Background(), w, alive)
	select {
	case tick <- time.Now(): // the late round is over
	case <-time.After(waitFor):
		t.Fatal("watchdog is not waiting for its ticker")
	}
	<-checked
	if got := sock.next(t); got != "WATCHDOG=1" {
		t.Fatalf("got %q, want WATCHDOG=1 from the second, timely round", got)
	}
	sock.expectNone(t)
	if msgs := h.Messages(); len(msgs) == 0 || !strings.Contains(msgs[0], "deadline") {
		t.Errorf("log %q: want the late answer reported as a missed deadline", msgs)
	}
}

func TestWatchdogCadence(t *testing.T) {
	sock := listenNotify(t)
	const interval = 100 * time.Millisecond
	w := NewWatchdog(New(sock.addr, nil), interval, nil)
	start := time.Now()
	runWatchdog(t, context.Background(), w, pass)
	for i := range 3 {
		if got := sock.next(t); got != "WATCHDOG=1" {
			t.Fatalf("pet %d: got %q, want WATCHDOG=1", i, got)
		}
	}
	// The first pet is immediate, the others come one per half interval.
	if elapsed := time.Since(start); elapsed < interval {
		t.Errorf("3 pets after %v, want no sooner than 2×interval/2 = %v", elapsed, interval)
	}
}
