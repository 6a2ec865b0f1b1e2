package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
)

// MCPLog is an MCP notifications/message, read for the journal.
type MCPLog struct {
	// Level is the level as sent ("warning", …).
	Level string
	// SlogLevel is Level as an slog level (see MCPLevel); Priority is its syslog
	// priority, 6 for an unknown level.
	SlogLevel slog.Level
	Priority  int
	// Logger is the optional logger name, "" when absent.
	Logger string
	// Message is data: a JSON string as it is, any other JSON value in
	// compact form, "" when data is absent or null.
	Message string
}

// ParseMCPLog reads the params of an MCP notifications/message
// ({"level": …, "logger": …, "data": …}). It fails only when params is not
// a JSON object with string level and logger; an unknown level gives
// priority 6.
func ParseMCPLog(params json.RawMessage) (MCPLog, error) {
	var p struct {
		Level  string          `json:"level"`
		Logger string          `json:"logger"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return MCPLog{}, fmt.Errorf("notifications/message params: %w", err)
	}
	m := MCPLog{Level: p.Level, Logger: p.Logger}
	m.SlogLevel, _ = MCPLevel(p.Level)
	m.Priority = LevelPriority(m.SlogLevel)
	data := bytes.TrimSpace(p.Data)
	switch {
	case len(data) == 0 || string(data) == "null":
	case data[0] == '"':
		if err := json.Unmarshal(data, &m.Message); err != nil {
			return MCPLog{}, fmt.Errorf("notifications/message data: %w", err)
		}
	default:
		var b bytes.Buffer
		if err := json.Compact(&b, data); err != nil {
			return MCPLog{}, fmt.Errorf("notifications/message data: %w", err)
		}
		m.Message = b.String()
	}
	return m, nil
}
