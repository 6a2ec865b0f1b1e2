package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// sendContext bounds the sending of a call to a backend by its timeout.
// Sending waits only when the child's input queue is full, so the timer of
// context.WithTimeout was made and stopped on every call for nothing: this
// context takes its deadline when made and starts a timer only when Done
// is first asked for. stop releases that timer, as a CancelFunc does.
// Its zero value with deadline set is ready; it lives in the call.
type sendContext struct {
	deadline time.Time
	once     sync.Once
	ctx      context.Context // made by Done
	cancel   context.CancelFunc
	// trace, if set, is the context of the call's client op: its values
	// (the span) are this context's, for the backend (see
	// telemetry.Carry).
	trace context.Context
	// caller is who the call is sent for (backend.CallerKey).
	caller *backend.Caller
}

func (c *sendContext) timed() context.Context {
	c.once.Do(func() { c.ctx, c.cancel = context.WithDeadline(context.Background(), c.deadline) })
	return c.ctx
}

// Deadline returns the call's send deadline.
func (c *sendContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel closed at the deadline (or by stop).
func (c *sendContext) Done() <-chan struct{} { return c.timed().Done() }

// Err returns context.DeadlineExceeded once the deadline passed, or
// context.Canceled after stop.
func (c *sendContext) Err() error { return c.timed().Err() }

// Value returns the trace context's values; there are none without
// telemetry.
func (c *sendContext) Value(key any) any {
	if _, ok := key.(backend.CallerKey); ok && c.caller != nil {
		return c.caller
	}
	if c.trace != nil {
		return c.trace.Value(key)
	}
	return nil
}

// stop releases the timer if Done made one, and ends the context.
func (c *sendContext) stop() {
	c.once.Do(func() { c.ctx = stoppedContext })
	if c.cancel != nil {
		c.cancel()
	}
}

// stoppedContext is the context of a sendContext stopped before anything
// waited on it: cancelled, as one made by WithDeadline would be.
var stoppedContext = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
