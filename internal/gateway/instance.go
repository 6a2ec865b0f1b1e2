package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/backend"
)

// boundInstance returns the session's own instance of a pooled backend
// (instance = "session"), or nil before its first call to b. An instance
// that is gone (it failed for good, or a reload replaced the pool) is
// forgotten: the session's next call binds a fresh one.
func (s *Session) boundInstance(b *backend.Backend) *backend.Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.instances[b.Name()]
	if inst != nil && !b.Serves(inst) {
		delete(s.instances, b.Name())
		go inst.Release()
		return nil
	}
	return inst
}

// bindInstance binds an instance from b's pool to the session, waiting at
// most pool_acquire_timeout for one. Concurrent first calls of one session
// bind one instance between them.
func (s *Session) bindInstance(b *backend.Backend) (*backend.Backend, error) {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("the session has ended")
	}
	if inst := s.boundInstance(b); inst != nil {
		return inst, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.Config().PoolAcquireTimeout)
	inst, err := b.Acquire(ctx, s)
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
		if s.instances == nil {
			s.instances = map[string]*backend.Backend{} // a stateless request's first
		}
		s.instances[b.Name()] = inst
	}
	s.mu.Unlock()
	if closed {
		inst.Release()
		return nil, errors.New("the session has ended")
	}
	if s.stateless {
		s.g.log.Info(fmt.Sprintf("bound instance %d of backend %q to a stateless request of client %q", inst.Instance(), b.Name(), s.Client().Name), "client", s.Client().Name, "backend", b.Name(), "instance", inst.Instance(), "request", s.RequestID())
	} else {
		s.g.log.Info(fmt.Sprintf("bound instance %d of backend %q to a session of client %q", inst.Instance(), b.Name(), s.Client().Name), "client", s.Client().Name, "backend", b.Name(), "instance", inst.Instance(), "session_hash", SessionHash(s))
	}
	return inst, nil
}

// connOf returns the connection the session's messages to b go to: b's
// running child, or the session's own instance of a pooled b; nil if none
// runs.
func (s *Session) connOf(b *backend.Backend) *backend.Conn {
	if !b.Pooled() {
		return b.Conn()
	}
	if inst := s.boundInstance(b); inst != nil {
		return inst.Conn()
	}
	return nil
}

// pooled reports whether the named backend gives each session an instance
// of its own: its subscriptions are then the session's alone.
func (g *Gateway) pooled(name string) bool {
	b := g.registry.Backend(name)
	return b != nil && b.Pooled()
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
// tells sessions apart without being usable as their Mcp-Session-Id; for
// a stateless request, its RequestID, which its journal entries carry. It
// is "" for anything else.
func SessionHash(owner any) string {
	s, ok := owner.(*Session)
	if !ok {
		return ""
	}
	if s.stateless {
		return s.RequestID()
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
