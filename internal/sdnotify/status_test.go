package sdnotify

import (
	"context"
	"testing"
	"time"
)

// manualGap replaces the limiter's clock: every gap Run waits for is handed to
// the test, which ends it when it likes.
type manualGap struct {
	gaps chan chan time.Time
}

func (g *manualGap) after(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	g.gaps <- c
	return c
}

// started returns the gap Run waits for now, failing if it waits for none.
func (g *manualGap) started(t *testing.T) chan time.Time {
	t.Helper()
	select {
	case c := <-g.gaps:
		return c
	case <-time.After(waitFor):
		t.Fatal("limiter did not start waiting out its interval")
		return nil
	}
}

func TestStatusLimiterCoalesces(t *testing.T) {
	sock := listenNotify(t)
	l := NewStatusLimiter(New(sock.addr, nil), 100*time.Millisecond)
	// Buffered, so Run never blocks handing over a gap, even when the test
	// has failed and stopped looking.
	g := &manualGap{gaps: make(chan chan time.Time, 16)}
	l.after = g.after
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	// After a quiet time the first status goes out at once.
	l.Set("starting 3 backends")
	if got := sock.next(t); got != "STATUS=starting 3 backends" {
		t.Fatalf("got %q, want the first status at once", got)
	}
	gap := g.started(t)

	// A burst within the interval: nothing is sent until it ends, then
	// only the last status.
	l.Set("1/3 backends healthy")
	l.Set("2/3 backends healthy")
	l.Set("3/3 backends healthy, 42 tools")
	sock.expectNone(t)
	gap <- time.Now()
	if got := sock.next(t); got != "STATUS=3/3 backends healthy, 42 tools" {
		t.Fatalf("got %q, want only the last status of the burst", got)
	}
	gap = g.started(t)

	// A burst that ends where it began sends nothing.
	l.Set("github restarting (1/5)")
	l.Set("3/3 backends healthy, 42 tools")
	gap <- time.Now()

	// Quiet again: the next change goes out at once.
	l.Set("2/3 backends healthy, 30 tools; github restarting (2/5)")
	if got := sock.next(t); got != "STATUS=2/3 backends healthy, 30 tools; github restarting (2/5)" {
		t.Fatalf("got %q, want the change after the quiet time (and no repeat of the unchanged status)", got)
	}
	g.started(t)

	// Stopping flushes what is pending.
	l.Set("stopping")
	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return after its context ended")
	}
	if got := sock.next(t); got != "STATUS=stopping" {
		t.Fatalf("got %q, want the pending status flushed at the end", got)
	}
	sock.expectNone(t)
}

func TestStatusLimiterNothingSetSendsNothing(t *testing.T) {
	sock := listenNotify(t)
	l := NewStatusLimiter(New(sock.addr, nil), time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Run(ctx)
	sock.expectNone(t)
}

func TestStatusLimiterRealClock(t *testing.T) {
	sock := listenNotify(t)
	const interval = 50 * time.Millisecond
	l := NewStatusLimiter(New(sock.addr, nil), interval)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	start := time.Now()
	l.Set("a")
	if got := sock.next(t); got != "STATUS=a" {
		t.Fatalf("got %q, want STATUS=a", got)
	}
	l.Set("b")
	l.Set("c")
	if got := sock.next(t); got != "STATUS=c" {
		t.Fatalf("got %q, want STATUS=c", got)
	}
	// "a" went out after start, "c" at least an interval after "a".
	if d := time.Since(start); d < interval {
		t.Errorf("second status %v after the first was set, want no sooner than %v", d, interval)
	}
}
