package load

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Result is what one load run measured; latencies are in milliseconds.
type Result struct {
	Sessions    int     `json:"sessions"`
	Payload     int     `json:"payload_bytes"`
	Seconds     float64 `json:"seconds"`
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	CallsPerSec float64 `json:"calls_per_sec"`
	P50         float64 `json:"p50_ms"`
	P90         float64 `json:"p90_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
}

// Spec says what load to make.
type Spec struct {
	Sessions int
	Payload  int           // bytes of the echo tool's text
	Warmup   time.Duration // calls in this first stretch are not measured
	Duration time.Duration // the measured stretch
}

// Open initializes n sessions at url, at most 32 at a time, each on its
// own connection.
func Open(ctx context.Context, url string, n int, payload string) ([]*Session, error) {
	return open(ctx, url, n, payload, nil, "")
}

// OpenToken is Open for sessions that send a bearer token.
func OpenToken(ctx context.Context, url string, n int, payload, token string) ([]*Session, error) {
	return open(ctx, url, n, payload, nil, token)
}

// OpenShared initializes n sessions at url that share the connections of
// one client: sessions that will stay idle, whose memory at the gateway is
// then not hidden by that of their connections.
func OpenShared(ctx context.Context, url string, n int, client *http.Client) ([]*Session, error) {
	return open(ctx, url, n, "", client, "")
}

func open(ctx context.Context, url string, n int, payload string, client *http.Client, token string) ([]*Session, error) {
	// The first failure cancels the rest: a gateway that fails one
	// initialize is not waited for n times.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sessions := make([]*Session, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range sessions {
		sessions[i] = NewSession(url, payload)
		sessions[i].token = token
		if client != nil {
			sessions[i].http, sessions[i].shared = client, true
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := sessions[i].Initialize(ctx); err != nil {
				cancel(fmt.Errorf("session %d of %d: %w", i+1, n, err))
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		CloseAll(sessions)
		return nil, err
	}
	return sessions, nil
}

// CloseAll ends sessions, at most 32 at a time.
func CloseAll(sessions []*Session) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.Close()
		}()
	}
	wg.Wait()
}

// Run opens spec.Sessions sessions at url, each calling echo back to back
// through the warm-up and the measured stretch, and reports the latency
// of the calls that started in the measured stretch.
func Run(ctx context.Context, url string, spec Spec) (Result, error) {
	payload := strings.Repeat("x", spec.Payload)
	sessions, err := Open(ctx, url, spec.Sessions, payload)
	if err != nil {
		return Result{}, err
	}
	defer CloseAll(sessions)
	t := Drive(ctx, sessions, spec)
	return t.Result(), nil
}

// Tally is what one or more stretches of load measured.
type Tally struct {
	Sessions, Payload int
	Window            time.Duration // the measured stretches together
	Latencies         []time.Duration
	Errors            int
	FirstError        string
	Warmup            int // calls made in the warm-up, not measured
}

// Add adds the measurements of u to t.
func (t *Tally) Add(u Tally) {
	t.Window += u.Window
	t.Latencies = append(t.Latencies, u.Latencies...)
	t.Errors += u.Errors
	t.Warmup += u.Warmup
	if t.FirstError == "" {
		t.FirstError = u.FirstError
	}
}

// Made returns how many calls t made, warm-up and failures included.
func (t *Tally) Made() int { return len(t.Latencies) + t.Errors + t.Warmup }

// Result summarizes t: the rate and the percentiles of its latencies.
func (t *Tally) Result() Result {
	r := Result{Sessions: t.Sessions, Payload: t.Payload, Seconds: t.Window.Seconds(),
		Calls: len(t.Latencies), Errors: t.Errors, FirstError: t.FirstError}
	if t.Window > 0 {
		r.CallsPerSec = float64(len(t.Latencies)) / t.Window.Seconds()
	}
	if len(t.Latencies) == 0 {
		return r
	}
	lat := slices.Clone(t.Latencies)
	slices.Sort(lat)
	pick := func(q float64) float64 { return ms(lat[int(q*float64(len(lat)-1))]) }
	r.P50, r.P90, r.P99, r.Max = pick(0.50), pick(0.90), pick(0.99), ms(lat[len(lat)-1])
	return r
}

// Drive makes the load of spec with sessions already open and returns
// what it measured.
func Drive(ctx context.Context, sessions []*Session, spec Spec) Tally {
	start := time.Now()
	measured := start.Add(spec.Warmup)
	end := measured.Add(spec.Duration)
	ctx, cancel := context.WithDeadline(ctx, end.Add(CallTimeout))
	defer cancel()
	tallies := make([]Tally, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &tallies[i]
			t.Latencies = make([]time.Duration, 0, 1024)
			for {
				t0 := time.Now()
				if !t0.Before(end) || ctx.Err() != nil {
					return
				}
				err := s.Call(ctx, 0)
				d := time.Since(t0)
				if t0.Before(measured) {
					t.Warmup++
					continue
				}
				if err != nil {
					t.Errors++
					if t.FirstError == "" {
						t.FirstError = err.Error()
					}
					continue
				}
				t.Latencies = append(t.Latencies, d)
			}
		}()
	}
	wg.Wait()
	all := Tally{Sessions: len(sessions), Payload: len(sessions[0].payload), Window: spec.Duration}
	for _, t := range tallies {
		all.Add(t)
	}
	return all
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
