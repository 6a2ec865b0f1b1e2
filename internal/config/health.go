package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Health holds the keys of a backend's health checks, circuit breaker and
// catalog continuity. Each may be set in [gateway] as the default of every
// backend, which a backend's own value overrides.
type Health struct {
	HealthInterval     time.Duration // default 30s; 0 ("off") disables checks
	HealthTimeout      time.Duration // default 5s
	FailureThreshold   int           // default 3
	RecoveryMultiplier int           // default 3
	StartWait          time.Duration // default 10s
	CatalogGrace       time.Duration // default 30s; 0 ("off") drops lists at once
	CatalogRefresh     time.Duration // default 0 ("off")
}

// defaultHealth is the one place that knows the health defaults.
func defaultHealth() Health {
	return Health{
		HealthInterval:     30 * time.Second,
		HealthTimeout:      5 * time.Second,
		FailureThreshold:   3,
		RecoveryMultiplier: 3,
		StartWait:          10 * time.Second,
		CatalogGrace:       30 * time.Second,
	}
}

// Calls holds the per-backend limits on the call path and its fallbacks.
type Calls struct {
	MaxConcurrentCalls int           // default 0, unlimited
	QueueTimeout       time.Duration // default 30s
	RateLimit          RateLimit     // default off
	Fallback           []string      // backends tried when this one cannot serve
}

func defaultCalls() Calls { return Calls{QueueTimeout: 30 * time.Second} }

// healthFields are the Health keys, decoding into whatever table holds a
// Health: [gateway] (the defaults) or [backends.NAME].
func healthFields[T any](health func(*T) *Health) []field[T] {
	return []field[T]{
		{"health_interval", func(d *decoder, at keyPath, v any, t *T) bool {
			return d.durationOrOff(at, v, &health(t).HealthInterval)
		}},
		{"health_timeout", func(d *decoder, at keyPath, v any, t *T) bool {
			return d.duration(at, v, &health(t).HealthTimeout)
		}},
		{"failure_threshold", func(d *decoder, at keyPath, v any, t *T) bool {
			return integer(d, at, v, &health(t).FailureThreshold, 1, 1000)
		}},
		{"recovery_multiplier", func(d *decoder, at keyPath, v any, t *T) bool {
			return integer(d, at, v, &health(t).RecoveryMultiplier, 1, 1000)
		}},
		{"start_wait", func(d *decoder, at keyPath, v any, t *T) bool {
			return d.durationOrOff(at, v, &health(t).StartWait)
		}},
		{"catalog_grace", func(d *decoder, at keyPath, v any, t *T) bool {
			return d.durationOrOff(at, v, &health(t).CatalogGrace)
		}},
		{"catalog_refresh", func(d *decoder, at keyPath, v any, t *T) bool {
			return d.durationOrOff(at, v, &health(t).CatalogRefresh)
		}},
	}
}

// callFields are the backend keys of Calls.
func callFields() []field[Backend] {
	return []field[Backend]{
		{"max_concurrent_calls", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return integer(d, at, v, &b.MaxConcurrentCalls, 0, math.MaxInt32)
		}},
		{"queue_timeout", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.QueueTimeout)
		}},
		{"rate_limit", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.rateLimit(at, v, &b.RateLimit)
		}},
		{"fallback", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.strList(at, v, &b.Fallback, checkNotEmpty)
		}},
	}
}

// durationOrOff is duration that also accepts "off", stored as 0.
func (d *decoder) durationOrOff(at keyPath, v any, dst *time.Duration) bool {
	s, ok := v.(string)
	if ok && s == "off" {
		*dst = 0
		return true
	}
	if dur, err := time.ParseDuration(s); ok && err == nil && dur <= 0 {
		d.fail(at, `duration %q is not positive; write "off" to turn this off, or a value such as "30s"`, s)
		return false
	}
	return d.duration(at, v, dst)
}

// checkFallbacks reports fallbacks that name no backend, name the backend
// itself, or form a cycle: a call could then bounce between backends.
func (l *loader) checkFallbacks(cfg *Config) {
	for _, name := range cfg.names() {
		b := cfg.Backends[name]
		for _, fb := range b.Fallback {
			switch {
			case fb == name:
				l.failBackend(b, "fallback", fmt.Sprintf("backend %q names itself as its fallback; remove %q", name, fb))
			case cfg.Backends[fb] == nil:
				hint := ""
				if s := closestKey(fb, cfg.names()); s != "" {
					hint = fmt.Sprintf(" (did you mean %q?)", s)
				}
				l.failBackend(b, "fallback", fmt.Sprintf("fallback %q is not a configured backend%s", fb, hint))
			}
		}
	}
	// A cycle: walk each backend's fallbacks depth first.
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(name string) bool
	visit = func(name string) bool {
		switch state[name] {
		case active:
			i := len(path) - 1
			for path[i] != name {
				i--
			}
			cycle := append(append([]string(nil), path[i:]...), name)
			l.failBackend(cfg.Backends[path[len(path)-1]], "fallback", fmt.Sprintf("fallback cycle %s; a call could go round it forever, remove one of them", joinArrow(cycle)))
			return true
		case done:
			return false
		}
		state[name] = active
		path = append(path, name)
		for _, fb := range cfg.Backends[name].Fallback {
			if fb != name && cfg.Backends[fb] != nil && visit(fb) {
				return true
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return false
	}
	for _, name := range cfg.names() {
		path = path[:0]
		if state[name] == unseen && visit(name) {
			return // one cycle at a time: its report names every member
		}
	}
}

func joinArrow(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(quoted, " → ")
}

// names returns the backends' names, sorted.
func (c *Config) names() []string {
	return slices.Sorted(maps.Keys(c.Backends))
}

// failBackend reports a problem with key of backend b, at the line where
// the key was written in b's file.
func (l *loader) failBackend(b *Backend, key, msg string) {
	at := keyPath{"backends", b.Name, key}
	for _, f := range l.files {
		if f.path == b.File {
			(&decoder{l: l, f: f}).fail(at, "%s", msg)
			return
		}
	}
	l.add(0, &Error{File: b.File, Line: b.Line, Key: at.String(), Msg: msg})
}

// checkMetricsListen accepts what the metrics listener can be: an address,
// a unix socket path, or the socket-activated fd named "metrics".
func checkMetricsListen(s string) string {
	if s == "" || s == "fd:metrics" {
		return ""
	}
	if msg := checkListen(s); msg != "" {
		return msg + `, or "fd:metrics" for the socket-activated fd named metrics`
	}
	return ""
}
