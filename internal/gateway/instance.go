package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// connFor returns the connection a call of s to b goes to when one is at
// hand. Otherwise it returns a function that waits for one, to be run off
// the request's goroutine: the session's own instance of a pooled backend
// (instance = "session"), bound on its first use, or the start of a backend
// that is idle (start = "on-demand", idle_stop) or starting. Both are nil
// when b cannot take calls.
func (s *Session) connFor(b *backend.Backend) (*backend.Conn, func() (*backend.Conn, error)) {
	if b.Pooled() {
		s.mu.Lock()
		inst := s.instances[b.Name()]
		s.mu.Unlock()
		if inst != nil {
			if conn := inst.Conn(); conn != nil {
				return conn, nil
			}
		}
		return nil, func() (*backend.Conn, error) { return s.instanceConn(b) }
	}
	if conn := b.Conn(); conn != nil {
		return conn, nil
	}
	switch b.Status().State {
	case backend.Idle, backend.Starting:
		return nil, func() (*backend.Conn, error) { return demand(b, b) }
	}
	return nil, nil
}

// demand starts inst (b itself, or an instance of b) if it is idle and
// waits for its handshake, at most b's start_wait.
func demand(b, inst *backend.Backend) (*backend.Conn, error) {
	wait := b.Config().StartWait
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := inst.Demand(ctx)
	switch {
	case err == nil:
		return conn, nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("backend %q did not become ready within %s (start_wait): %w", inst.InstanceName(), wait, unavailable(inst))
	}
	return nil, unavailable(inst)
}

// instanceConn returns the connection of the session's own instance of b,
// binding one from b's pool on first use. Calls of one session bind one
// instance, however many arrive at once.
func (s *Session) instanceConn(b *backend.Backend) (*backend.Conn, error) {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	s.mu.Lock()
	inst, closed := s.instances[b.Name()], s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("the session has ended")
	}
	if inst == nil {
		ctx, cancel := context.WithTimeout(context.Background(), b.Config().PoolAcquireTimeout)
		var err error
		inst, err = b.Acquire(ctx, s)
		cancel()
		if errors.Is(err, backend.ErrStopped) {
			return nil, unavailable(b)
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		closed = s.closed
		if !closed {
			s.instances[b.Name()] = inst
		}
		s.mu.Unlock()
		if closed {
			inst.Release()
			return nil, errors.New("the session has ended")
		}
		s.g.log.Info("bound an instance to a session", "backend", b.Name(), "instance", inst.Instance(), "session_hash", SessionHash(s))
	}
	return demand(b, inst)
}

// releaseInstances stops the instances bound to a session that ended.
func (s *Session) releaseInstances(instances map[string]*backend.Backend) {
	for _, inst := range instances {
		inst.Release()
	}
}

// ownerSession returns the session a dedicated instance serves, or nil.
func ownerSession(conn *backend.Conn) *Session {
	s, _ := conn.Backend().Owner().(*Session)
	return s
}

// SessionHash returns what may be shown of the session that owns an
// instance (backend.InstanceStatus.Owner): a short hash of its id, which
// identifies it in logs without being usable as its Mcp-Session-Id. It is
// "" for anything else.
func SessionHash(owner any) string {
	s, ok := owner.(*Session)
	if !ok {
		return ""
	}
	sum := sha256.Sum256([]byte(s.ID))
	return hex.EncodeToString(sum[:6])
}

// Subscribed reports whether a client session holds a subscription on the
// named backend, which keeps idle_stop from stopping it.
func (g *Gateway) Subscribed(name string) bool {
	g.subsMu.Lock()
	defer g.subsMu.Unlock()
	for k := range g.subs {
		if k.backend == name {
			return true
		}
	}
	return false
}
