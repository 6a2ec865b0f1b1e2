package config

import (
	"math"
	"time"
)

// Limits are the [gateway] keys that bound what clients may hold in the
// daemon: sessions, requests in flight, and how long idle things live.
// Every one has a default that serves a desktop and a small team.
type Limits struct {
	MaxSessions           int           // default 1000
	SessionIdleTimeout    time.Duration // default 1h
	ResumeWindow          time.Duration // default 5s
	MaxConcurrentRequests int           // default 64
	MaxBatchSize          int           // messages in one JSON-RPC batch; default 32
	HTTPReadTimeout       time.Duration // default 60s
	HTTPIdleTimeout       time.Duration // default 2m
	SSEKeepAliveInterval  time.Duration // default 25s
	MaxSubscriptions      int           // per session; default 1000
	// MaxInputRequiredCalls bounds the stateless calls waiting for their
	// client's retry after an InputRequiredResult; default 1000.
	MaxInputRequiredCalls int
	// MaxInputRequiredCallsPerClient bounds those of one client; default 100.
	MaxInputRequiredCallsPerClient int
	// MaxTasks bounds the tasks (MCP Tasks) the gateway routes at once,
	// and MaxTasksPerClient those of one client; defaults 1000 and 100.
	MaxTasks, MaxTasksPerClient int
	// MaxTaskTTL bounds how long the gateway keeps a task, whatever ttl
	// its backend gave it; default 24h.
	MaxTaskTTL time.Duration
}

// defaultLimits is the one place that knows the defaults of Limits.
func defaultLimits() Limits {
	return Limits{
		MaxSessions:           1000,
		SessionIdleTimeout:    time.Hour,
		ResumeWindow:          5 * time.Second,
		MaxConcurrentRequests: 64,
		MaxBatchSize:          32,
		HTTPReadTimeout:       60 * time.Second,
		HTTPIdleTimeout:       2 * time.Minute,
		SSEKeepAliveInterval:  25 * time.Second,
		MaxSubscriptions:      1000,

		MaxInputRequiredCalls:          1000,
		MaxInputRequiredCallsPerClient: 100,
		MaxTasks:                       1000,
		MaxTasksPerClient:              100,
		MaxTaskTTL:                     24 * time.Hour,
	}
}

func limitFields() []field[Gateway] {
	return []field[Gateway]{
		{"max_sessions", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxSessions, 1, math.MaxInt32)
		}},
		{"session_idle_timeout", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.SessionIdleTimeout)
		}},
		{"resume_window", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.ResumeWindow)
		}},
		{"max_concurrent_requests", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxConcurrentRequests, 1, math.MaxInt32)
		}},
		{"max_batch_size", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxBatchSize, 1, math.MaxInt32)
		}},
		{"http_read_timeout", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.HTTPReadTimeout)
		}},
		{"http_idle_timeout", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.HTTPIdleTimeout)
		}},
		{"sse_keepalive_interval", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.SSEKeepAliveInterval)
		}},
		{"max_subscriptions", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxSubscriptions, 1, math.MaxInt32)
		}},
		{"max_input_required_calls", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxInputRequiredCalls, 1, math.MaxInt32)
		}},
		{"max_input_required_calls_per_client", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxInputRequiredCallsPerClient, 1, math.MaxInt32)
		}},
		{"max_tasks", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxTasks, 1, math.MaxInt32)
		}},
		{"max_tasks_per_client", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return integer(d, at, v, &g.MaxTasksPerClient, 1, math.MaxInt32)
		}},
		{"max_task_ttl", func(d *decoder, at keyPath, v any, g *Gateway) bool {
			return d.duration(at, v, &g.MaxTaskTTL)
		}},
	}
}
