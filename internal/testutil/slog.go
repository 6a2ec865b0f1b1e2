package testutil

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// LogRecorder is a slog.Handler that keeps every record it handles as one
// line: "LEVEL message key=value …".
type LogRecorder struct {
	mu   sync.Mutex
	msgs []string
}

// Enabled reports true for every level.
func (h *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs returns h: attributes added to loggers are not recorded.
func (h *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h.
func (h *LogRecorder) WithGroup(string) slog.Handler { return h }

// Handle records r.
func (h *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.msgs = append(h.msgs, b.String())
	h.mu.Unlock()
	return nil
}

// Messages returns the records so far.
func (h *LogRecorder) Messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}
