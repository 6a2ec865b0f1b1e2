package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Probe checks a child after one of its calls timed out. While the probe
// runs the backend is unhealthy. A child that neither answers a ping nor
// writes anything meanwhile is killed, and the usual restart policy
// applies; one that is busy writing for other calls is left alone.
func (b *Backend) Probe(conn *Conn) {
	if !b.transition(conn, Healthy, Unhealthy, "a call timed out; checking the backend with ping") {
		return
	}
	go func() {
		timeout := min(b.cfg.Timeout, 10*time.Second)
		reads := conn.reads.Load()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := conn.Call(ctx, conn.pingMethod(), nil)
		var rpcErr *jsonrpc.Error
		if err == nil || errors.As(err, &rpcErr) || conn.reads.Load() != reads {
			if err != nil && rpcErr == nil {
				b.log.Info(fmt.Sprintf("backend %q did not answer ping in time but is writing; keeping it", b.name), conn.ident())
			}
			b.transition(conn, Unhealthy, Healthy, "")
			return
		}
		// Decide and act under the lock that Run's stop and restart take,
		// so a child that was replaced meanwhile is never touched; the
		// signal goes through the child's pidfd, which never reaches a
		// reaped child's reused pid.
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.conn != conn || b.st.State != Unhealthy {
			return
		}
		b.log.Warn(fmt.Sprintf("backend %q does not answer ping after a timed-out call; killing it", b.name), conn.ident())
		conn.reason.Store(ptr("did not answer ping after a call timed out"))
		conn.abort()
	}()
}

// transition moves the backend from state from to state to, with lastError,
// if conn is still its connection and it is still in state from; all under
// one lock. It reports whether it did.
func (b *Backend) transition(conn *Conn, from, to State, lastError string) bool {
	b.mu.Lock()
	if b.conn != conn || b.st.State != from {
		b.mu.Unlock()
		return false
	}
	b.st.State, b.st.Since, b.st.LastError, b.st.Cause = to, time.Now(), lastError, lastError // ours, fixed
	b.mu.Unlock()
	b.changed()
	return true
}
