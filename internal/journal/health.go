package journal

// Events of backend health checks and fallbacks.
const (
	// MessageCircuitOpen: a backend failed failure_threshold health checks
	// in a row; its calls fail at once until its half-open check.
	MessageCircuitOpen MessageID = "f73bb2a5780340c2ac9cb0e14d88eb30"
	// MessageCircuitClosed: a backend answered its half-open health check.
	MessageCircuitClosed MessageID = "5b5ea88c53784717b9f8062cc4eaaeb9"
	// MessageFallback: a tools/call went to a fallback backend.
	MessageFallback MessageID = "d322c5eddeec4fc4b583c622e2683ec1"
)
