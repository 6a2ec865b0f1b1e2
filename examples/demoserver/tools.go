package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// tool is one demo tool.
type tool struct {
	name, title, description string
	inputSchema              string // JSON Schema
	outputSchema             string // JSON Schema of structuredContent; empty when none
	run                      func(s *server, args json.RawMessage) (toolResult, error)
}

// tools is the demo's tool table, in listing order.
func tools() []tool {
	return []tool{
		{
			name: "echo", title: "Echo",
			description: "Returns the given text unchanged. Handy to check that the gateway reaches the server.",
			inputSchema: `{"type":"object","properties":{"text":{"type":"string","description":"Text to send back."}},"required":["text"]}`,
			run:         (*server).echo,
		},
		{
			name: "add", title: "Add two numbers",
			description:  "Adds a and b and returns the sum.",
			inputSchema:  `{"type":"object","properties":{"a":{"type":"number","description":"First addend."},"b":{"type":"number","description":"Second addend."}},"required":["a","b"]}`,
			outputSchema: `{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`,
			run:          (*server).add,
		},
		{
			name: "now", title: "Current time",
			description:  "Tells the current date and time in an IANA time zone such as Europe/Berlin or America/New_York (default UTC).",
			inputSchema:  `{"type":"object","properties":{"timezone":{"type":"string","description":"IANA time zone name.","default":"UTC"}}}`,
			outputSchema: `{"type":"object","properties":{"time":{"type":"string","format":"date-time"},"timezone":{"type":"string"},"weekday":{"type":"string"}},"required":["time","timezone","weekday"]}`,
			run:          (*server).currentTime,
		},
		{
			name: "random_quote", title: "Random quote",
			description: "Returns a random quote about programming.",
			inputSchema: `{"type":"object","properties":{}}`,
			run:         (*server).randomQuote,
		},
	}
}

// toolList is the tools/list entry of every tool.
func toolList() []map[string]any {
	var list []map[string]any
	for _, t := range tools() {
		entry := map[string]any{
			"name": t.name, "title": t.title, "description": t.description,
			"inputSchema": json.RawMessage(t.inputSchema),
		}
		if t.outputSchema != "" {
			entry["outputSchema"] = json.RawMessage(t.outputSchema)
		}
		list = append(list, entry)
	}
	return list
}

// toolResult is an MCP CallToolResult.
type toolResult struct {
	Content           []textContent `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func textResult(text string) toolResult {
	return toolResult{Content: []textContent{{Type: "text", Text: text}}}
}

// toolError is a failed call the model can read and correct.
func toolError(format string, args ...any) toolResult {
	r := textResult(fmt.Sprintf(format, args...))
	r.IsError = true
	return r
}

func (s *server) callTool(params json.RawMessage) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "tools/call: " + err.Error()}
	}
	for _, t := range tools() {
		if t.name == p.Name {
			if len(p.Arguments) == 0 || string(p.Arguments) == "null" {
				p.Arguments = json.RawMessage("{}")
			}
			return t.run(s, p.Arguments)
		}
	}
	return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("unknown tool %q; try echo, add, now or random_quote", p.Name)}
}

func (s *server) echo(args json.RawMessage) (toolResult, error) {
	var a struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Text == nil {
		return toolError("echo needs a string argument text"), nil
	}
	return textResult(*a.Text), nil
}

func (s *server) add(args json.RawMessage) (toolResult, error) {
	var a struct {
		A *float64 `json:"a"`
		B *float64 `json:"b"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.A == nil || a.B == nil {
		return toolError("add needs two numbers, a and b"), nil
	}
	sum := *a.A + *a.B
	r := textResult(strconv.FormatFloat(sum, 'g', -1, 64))
	r.StructuredContent = map[string]float64{"sum": sum}
	return r, nil
}

func (s *server) currentTime(args json.RawMessage) (toolResult, error) {
	var a struct {
		Timezone string `json:"timezone"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return toolError("now takes an optional string argument timezone"), nil
	}
	if a.Timezone == "" {
		a.Timezone = "UTC"
	}
	loc, err := time.LoadLocation(a.Timezone)
	if err != nil {
		return toolError("unknown time zone %q: use an IANA name such as Europe/Paris", a.Timezone), nil
	}
	t := s.now().In(loc)
	r := textResult(fmt.Sprintf("%s (%s, %s)", t.Format(time.RFC3339), t.Weekday(), a.Timezone))
	r.StructuredContent = map[string]string{"time": t.Format(time.RFC3339), "timezone": a.Timezone, "weekday": t.Weekday().String()}
	return r, nil
}

// quotes are short, well-known sayings about programming.
func quotes() []string {
	return []string{
		"Simplicity is prerequisite for reliability. — Edsger W. Dijkstra",
		"Premature optimization is the root of all evil. — Donald Knuth",
		"Make it work, make it right, make it fast. — Kent Beck",
		"The most dangerous phrase in the language is \"We've always done it this way.\" — Grace Hopper",
		"Clear is better than clever. — Go Proverbs",
	}
}

func (s *server) randomQuote(json.RawMessage) (toolResult, error) {
	q := quotes()
	return textResult(q[s.pick(len(q))]), nil
}
