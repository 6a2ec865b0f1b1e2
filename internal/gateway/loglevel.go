package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// setLevel records the session's log level and passes on to every backend
// that logs and that the session may see the most verbose level any
// session that sees it asked for: the level is the session's own, the
// gateway filters what each session gets.
func (s *Session) setLevel(msg *jsonrpc.Message, stream *Stream) {
	level, _, err := stringParam(msg.Params, "level")
	prio, ok := journal.MCPLevelPriority(level)
	if err != nil || !ok || level != strings.ToLower(level) {
		stream.push(errorResponse(msg.ID, jsonrpc.CodeInvalidParams, "params.level must be one of debug, info, notice, warning, error, critical, alert, emergency"), true)
		return
	}
	// Levels worked out together are sent in that order, so a backend
	// ends with the level that counts every session's.
	s.g.levelMu.Lock()
	defer s.g.levelMu.Unlock()
	s.mu.Lock()
	s.logLevel = prio
	s.mu.Unlock()
	// The client is answered once every backend answered or timed out;
	// the last one to end answers, so no goroutine waits for them.
	var conns []*backend.Conn
	var levels []json.RawMessage
	for _, b := range s.g.registry.Backends() {
		// A 2026-07-28 backend takes the level with each request (modernCall).
		if conn := s.connOf(b); conn != nil && !conn.Modern() && conn.Server().Capabilities.Logging != nil && s.seesBackend(b.Name()) {
			conns = append(conns, conn)
			levels = append(levels, levelParams(s.g.mostVerbose(b, prio)))
		}
	}
	answer := func() { stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true) }
	if len(conns) == 0 {
		answer()
		return
	}
	var left atomic.Int64
	left.Store(int64(len(conns)))
	for i, conn := range conns {
		conn.Async(msg.Method, levels[i], conn.Backend().Config().Timeout, func(*jsonrpc.Message, error) {
			if left.Add(-1) == 0 {
				answer()
			}
		})
	}
}

// mcpLevels are MCP's log levels by syslog priority.
var mcpLevels = [...]string{"emergency", "alert", "critical", "error", "warning", "notice", "info", "debug"}

// mostVerbose returns the most verbose of prio and the levels set by the
// sessions that see b: what b should send, as syslog priority. A session's
// own instance of a pooled backend logs for it alone.
func (g *Gateway) mostVerbose(b *backend.Backend, prio int) int {
	if b.Pooled() {
		return prio
	}
	g.eachSession(func(o *Session) {
		o.mu.Lock()
		level := o.logLevel
		o.mu.Unlock()
		if level > prio && o.seesBackend(b.Name()) {
			prio = level
		}
	})
	return prio
}

// levelParams returns the params of logging/setLevel for a syslog priority.
func levelParams(prio int) json.RawMessage {
	return append(jsonrpc.AppendString([]byte(`{"level":`), mcpLevels[prio]), '}')
}

// releaseLevel passes on, once a session that set a log level has ended,
// the level the remaining sessions want to each backend it saw, if that is
// less verbose: a backend logs at the most verbose level some session that
// sees it asked for, not at that of a session gone. When no remaining
// session asked, the backend keeps its level (MCP cannot unset it).
func (s *Session) releaseLevel() {
	s.mu.Lock()
	prio := s.logLevel
	s.mu.Unlock()
	if prio < 0 || s.g.draining.Load() {
		return // nothing asked, or every session is about to end
	}
	s.g.levelMu.Lock()
	defer s.g.levelMu.Unlock()
	for _, b := range s.g.registry.Backends() {
		conn := b.Conn()
		if b.Pooled() || conn == nil || conn.Modern() || conn.Server().Capabilities.Logging == nil || !s.seesBackend(b.Name()) {
			continue
		}
		if level := s.g.mostVerbose(b, -1); level >= 0 && level < prio {
			conn.Async("logging/setLevel", levelParams(level), b.Config().Timeout, func(*jsonrpc.Message, error) {})
		}
	}
}

// notifyAll sends a notification to each given backend that is running
// (to the session's own instance of a pooled one), waiting at most a second
// for each one's input to take it.
func (s *Session) notifyAll(backends []*backend.Backend, method string, params json.RawMessage) {
	for _, b := range backends {
		if conn := s.connOf(b); conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Notify(ctx, method, params)
			cancel()
		}
	}
}
