package telemetry

import "go.opentelemetry.io/otel/attribute"

// mcpgate's own attributes, beside those of the MCP semantic conventions
// (semconv v1.41.0, the last version of the Go package that carries
// them), documented in mcpgated(8), TELEMETRY.
const (
	// Backend is the backend a client span (or an admission) is for: a
	// pool's name for each of its instances.
	Backend = attribute.Key("mcpgate.backend")
	// Instance is the number of the pool instance a call went to.
	Instance = attribute.Key("mcpgate.backend.instance")
	// Client is the configured client a request came from.
	Client = attribute.Key("mcpgate.client")
	// Identity is who authenticated as the client, the identity the call
	// ran as (MCPGATE_IDENTITY in the journal); absent without auth.
	Identity = attribute.Key("mcpgate.identity")
	// Refusal says why the gateway refused a request before any backend
	// saw it: "policy" for what the client's policy or profile hides.
	Refusal = attribute.Key("mcpgate.refusal")
	// FallbackFrom is, on the client span of a fallback's attempt, the
	// backend that could not serve the call.
	FallbackFrom = attribute.Key("mcpgate.fallback.from")
	// Composite and Step name the composite tool a step belongs to, and
	// the step's number from 0.
	Composite = attribute.Key("mcpgate.composite")
	Step      = attribute.Key("mcpgate.composite.step")
	// Admission is what a call waited for before its backend took it:
	// "queue" (max_concurrent_calls), "start" (a backend starting, on
	// demand or after a crash) or "instance" (a pool's instance).
	Admission = attribute.Key("mcpgate.admission")
	// InputRound numbers the rounds of input a call asked its client for.
	InputRound = attribute.Key("mcpgate.input.round")
)

// Error types mcpgate reports in error.type besides a JSON-RPC error's
// code.
const (
	// ErrToolError is a tools/call result with isError set, as the
	// conventions name it.
	ErrToolError = "tool_error"
	// ErrRefused is a request the gateway refused by the client's policy.
	ErrRefused = "refused"
	// ErrCancelled is a request that ended without an answer: the client
	// cancelled it, went away, or its session ended.
	ErrCancelled = "cancelled"
	// ErrTimeout is a backend that did not answer in time.
	ErrTimeout = "timeout"
	// ErrUnavailable is a backend that could not take or finish the
	// call: not running, gone mid-call, its circuit open.
	ErrUnavailable = "unavailable"
	// ErrTooLarge is an answer over max_message_bytes.
	ErrTooLarge = "too_large"
)
