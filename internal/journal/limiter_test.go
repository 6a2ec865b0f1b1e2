package journal

import (
	"fmt"
	"testing"
	"time"
)

// TestLimiter: per key and window the first entries are journaled, the
// rest counted and reported with the next one; all keys together stay
// within the total; a new window starts afresh.
func TestLimiter(t *testing.T) {
	l := NewLimiter(time.Minute, 3, 5, 100)
	t0 := time.Unix(1000, 0)
	type want struct {
		log        bool
		suppressed int
		last       bool
	}
	check := func(what, key string, now time.Time, w want) {
		t.Helper()
		log, suppressed, last := l.Allow(key, now)
		if (want{log, suppressed, last}) != w {
			t.Errorf("%s: Allow(%q) = %v, %d, %v; want %+v", what, key, log, suppressed, last, w)
		}
	}
	check("a 1", "a", t0, want{true, 0, false})
	check("a 2", "a", t0, want{true, 0, false})
	check("a 3", "a", t0, want{true, 0, true})
	for i := range 100 {
		check(fmt.Sprint("a flood ", i), "a", t0.Add(time.Second), want{false, 0, false})
	}
	check("b 1", "b", t0, want{true, 0, false})
	check("b 2, the total", "b", t0, want{true, 0, true})
	check("c, beyond the total", "c", t0, want{false, 0, false})
	later := t0.Add(2 * time.Minute)
	check("a in a new window", "a", later, want{true, 100, false})
	check("c in a new window", "c", later, want{true, 1, false})
}

// TestLimiterForgetsKeys: the keys remembered stay within maxKeys.
func TestLimiterForgetsKeys(t *testing.T) {
	l := NewLimiter(time.Minute, 1, 1000, 10)
	now := time.Unix(1000, 0)
	for i := range 1000 {
		l.Allow(fmt.Sprint(i), now)
	}
	if n := len(l.keys); n > 10 {
		t.Errorf("%d keys remembered, want at most 10", n)
	}
}
