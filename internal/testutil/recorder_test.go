package testutil

import (
	"testing"
	"time"
)

func TestRecorderWithinSeesLaterArrivals(t *testing.T) {
	var r Recorder[int]
	r.Add(1)
	go func() {
		for i := 2; i <= 5; i++ {
			r.Add(i)
		}
	}()
	var at int
	if !r.Within(10*time.Second, Index(0, func(v int) bool { return v == 5 }, &at)) || at != 4 {
		t.Fatalf("Within did not find 5 at index 4 (found %d)", at)
	}
	if r.Within(10*time.Millisecond, func(items []int) bool { return len(items) > 5 }) {
		t.Error("Within reported a condition that cannot hold")
	}
	if r.Len() != 5 || len(r.All()) != 5 {
		t.Errorf("Len %d, All %v", r.Len(), r.All())
	}
}
