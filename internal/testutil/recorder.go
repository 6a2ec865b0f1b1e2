package testutil

import (
	"sync"
	"time"
)

// Recorder keeps values that arrive on other goroutines (notify datagrams,
// D-Bus signals, client notifications) so that a test can await them
// without sleeping. The zero value is ready to use.
type Recorder[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{} // closed by the next Add; nil when nobody waits
}

// Add records v and wakes whoever waits.
func (r *Recorder[T]) Add(v T) {
	r.mu.Lock()
	r.items = append(r.items, v)
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	r.mu.Unlock()
}

// All returns everything recorded so far, oldest first.
func (r *Recorder[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

// Len returns how many values have been recorded, e.g. to await only what
// comes after a point.
func (r *Recorder[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

// Within calls check with everything recorded so far, and again after each
// arrival, until check returns true or timeout passes. It reports whether
// check returned true.
func (r *Recorder[T]) Within(timeout time.Duration, check func(items []T) bool) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		items := append([]T(nil), r.items...)
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		wake := r.wake
		r.mu.Unlock()
		if check(items) {
			return true
		}
		select {
		case <-wake:
		case <-timer.C:
			return false
		}
	}
}

// Index returns a check for Within that finds the first item at index from
// or later that satisfies match, storing its index in *found.
func Index[T any](from int, match func(T) bool, found *int) func([]T) bool {
	return func(items []T) bool {
		for i := from; i < len(items); i++ {
			if match(items[i]) {
				*found = i
				return true
			}
		}
		return false
	}
}
