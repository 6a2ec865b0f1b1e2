package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// setLevel records the session's log level and passes it on to every
// backend that logs.
func (s *Session) setLevel(msg *jsonrpc.Message, stream *Stream) {
	level, _, err := stringParam(msg.Params, "level")
	prio, ok := journal.MCPLevelPriority(level)
	if err != nil || !ok || level != strings.ToLower(level) {
		stream.push(errorResponse(msg.ID, jsonrpc.CodeInvalidParams, "params.level must be one of debug, info, notice, warning, error, critical, alert, emergency"), true)
		return
	}
	s.mu.Lock()
	s.logLevel = prio
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range s.g.registry.Backends() {
		conn := b.Conn()
		if conn == nil || conn.Server().Capabilities.Logging == nil {
			continue
		}
		wg.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), b.Config().Timeout)
		if _, err := conn.Go(ctx, msg.Method, jsonrpc.Compact(msg.Params), nil, func(*jsonrpc.Message, error) { cancel(); wg.Done() }); err != nil {
			cancel()
			wg.Done()
		}
	}
	go func() {
		wg.Wait()
		stream.push(jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)), true)
	}()
}

// notifyAll sends a notification to each given backend that is running,
// waiting at most a second for each one's input to take it.
func notifyAll(backends []*backend.Backend, method string, params json.RawMessage) {
	for _, b := range backends {
		if conn := b.Conn(); conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Notify(ctx, method, params)
			cancel()
		}
	}
}
