package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// Watchdog keeps systemd's service watchdog (WatchdogSec=) fed while the
// daemon is alive. A nil or disabled Watchdog does nothing.
type Watchdog struct {
	notifier *Notifier
	interval time.Duration // 0 = disabled
	log      *slog.Logger
	// newTicker paces the rounds; a time.Ticker outside tests.
	newTicker func(period time.Duration) (tick <-chan time.Time, stop func())
	// withTimeout gives a round its deadline; context.WithTimeout outside
	// tests.
	withTimeout func(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

// WatchdogFromEnv reads $WATCHDOG_USEC and $WATCHDOG_PID, removes both from the
// process environment so child processes never see them, and returns a
// Watchdog that pets through n. Call it once, early. It returns:
//   - a disabled Watchdog and nil when WATCHDOG_USEC is unset, or when
//     WATCHDOG_PID names another process;
//   - a disabled Watchdog and an error naming the variable when either is
//     malformed (the daemon can log it and run without a watchdog);
//   - an enabled Watchdog and nil otherwise.
func WatchdogFromEnv(n *Notifier, log *slog.Logger) (*Watchdog, error) {
	usec, pid := os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID")
	os.Unsetenv("WATCHDOG_USEC")
	os.Unsetenv("WATCHDOG_PID")
	disabled := NewWatchdog(n, 0, log)
	if usec == "" {
		return disabled, nil
	}
	u, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || u <= 0 {
		return disabled, fmt.Errorf("WATCHDOG_USEC=%q: want a positive number of microseconds", usec)
	}
	if pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil {
			return disabled, fmt.Errorf("WATCHDOG_PID=%q: want a process ID", pid)
		}
		if p != os.Getpid() {
			return disabled, nil
		}
	}
	return NewWatchdog(n, time.Duration(u)*time.Microsecond, log), nil
}

// NewWatchdog returns a Watchdog that pets through n for a service manager
// expecting WATCHDOG=1 at least once per interval. An interval of zero or less
// gives a disabled Watchdog. log gets liveness transitions (slog.Default if nil).
// It does not touch the environment.
func NewWatchdog(n *Notifier, interval time.Duration, log *slog.Logger) *Watchdog {
	if log == nil {
		log = slog.Default()
	}
	return &Watchdog{notifier: n, interval: max(interval, 0), log: log, newTicker: newTicker, withTimeout: context.WithTimeout}
}

// Interval returns the interval systemd expects WATCHDOG=1 within, or 0 when
// the Watchdog is disabled.
func (w *Watchdog) Interval() time.Duration {
	if w == nil {
		return 0
	}
	return w.interval
}

// Run calls alive at once and then every half interval, and sends WATCHDOG=1
// each time it returns nil in time; it returns when ctx is done. A disabled
// Watchdog returns at once.
//
// alive proves the daemon's own loops respond. It gets a context that expires
// after a quarter of the interval, and an answer after that counts as a
// failure: even with slow answers two pets are then at most three quarters of
// the interval apart, a margin for scheduling delays. While alive fails Run
// sends nothing and systemd restarts the service once the interval passes; the
// first failure and the recovery are logged, not every round. alive must
// return when its context is done; Run waits for it before returning.
func (w *Watchdog) Run(ctx context.Context, alive func(context.Context) error) {
	if w.Interval() <= 0 {
		return
	}
	tick, stop := w.newTicker(w.interval / 2)
	defer stop()
	failing := false
	for {
		err := w.check(ctx, alive, w.interval/4)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			if failing {
				failing = false
				w.log.Info("liveness check passes again; petting the watchdog")
			}
			w.notifier.Watchdog() // a failure is the Notifier's to log
		case !failing:
			failing = true
			w.log.Error("liveness check failed; not petting the watchdog, systemd restarts the service unless it recovers",
				"err", err, "watchdog_interval", w.interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

func newTicker(period time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(period)
	return t.C, t.Stop
}

// check runs alive with a deadline of timeout; success after the deadline is
// a failure.
func (w *Watchdog) check(ctx context.Context, alive func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := w.withTimeout(ctx, timeout)
	defer cancel()
	if err := alive(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("answered after the %v deadline: %w", timeout, err)
	}
	return nil
}
