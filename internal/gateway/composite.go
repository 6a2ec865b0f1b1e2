package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/clitool"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/telemetry"
)

// compositeOwner is the catalog owner of composite tools: no backend can
// have this name.
const compositeOwner = "@composite"

// compositeSource lists the configured composites for the catalog.
func (g *Gateway) compositeSource() catalog.Source {
	src := catalog.Source{Backend: compositeOwner, Lists: &backend.Lists{}}
	st := g.settings.Load()
	if st == nil {
		return src
	}
	src.Prefix = st.compositePrefix
	for _, name := range slices.Sorted(maps.Keys(st.composites)) {
		c := st.composites[name]
		entry := map[string]any{"name": name, "inputSchema": c.InputSchema}
		if c.Description != "" {
			entry["description"] = c.Description
		}
		src.Lists.Tools = append(src.Lists.Tools, rawJSON(entry))
	}
	return src
}

// compositeWarnings names the steps whose tools are not in cat, once no
// backend is starting any more (before, the catalog is not known).
func (g *Gateway) compositeWarnings(cat *catalog.Catalog) []string {
	st := g.settings.Load()
	if st == nil || len(st.composites) == 0 || g.draining.Load() {
		return nil // a stopping gateway's catalog empties: no news
	}
	for _, b := range g.registry.Backends() {
		if b.State() == backend.Starting {
			return nil
		}
	}
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(st.composites)) {
		for i, step := range st.composites[name].Steps {
			if _, ok := cat.Tool(step.Tool); !ok {
				warnings = append(warnings, fmt.Sprintf("composite %q step %d calls tool %q, which is not in the catalog; it fails until a backend provides it", name, i, step.Tool))
			}
		}
	}
	return warnings
}

// stepResult is what a finished step left for templates.
type stepResult struct {
	raw        json.RawMessage // the result object
	structured any             // its structuredContent, decoded
	text       string          // its text content, joined
}

// callComposite runs a composite's steps in order through HandleRequest,
// as this session, so each step meets the same policy, limits and routing
// as a call the client made itself.
func (s *Session) callComposite(msg *jsonrpc.Message, stream *Stream, name string, then func(ok bool, size int)) {
	var c *config.Composite
	if st := s.g.settings.Load(); st != nil {
		c = st.composites[name]
	}
	if c == nil {
		stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown tool %q", name)), true)
		return
	}
	input := map[string]any{}
	if raw, _, ok := jsonrpc.Lookup(msg.Params, "arguments"); ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &input); err != nil {
			stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "composite %q: arguments must be a JSON object", name)), true)
			return
		}
	}
	if err := clitool.Validate(c.InputSchema, input); err != nil {
		stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "composite %q: %v", name, err)), true)
		return
	}
	depth := compositeDepth(msg.ID) + 1
	if depth > maxCompositeDepth {
		stream.push(jsonrpc.AppendResult(nil, msg.ID, errorResult("composite %q: composites call composites at most %d deep; is there a cycle?", name, maxCompositeDepth)), true)
		return
	}
	progress, _, _ := jsonrpc.LookupPath(msg.Params, "_meta", "progressToken")
	seq := s.g.tokens.Add(1)
	traced := s.op(msg, stream) // the steps' spans are its children
	s.runLocal(msg, stream, then, func(ctx context.Context) []byte {
		if traced != nil {
			ctx = telemetry.Carry(ctx, traced.Context())
		}
		result := s.runSteps(ctx, c, input, depth, seq, func(i int, tool string) {
			if progress == nil {
				return
			}
			p := fmt.Appendf(nil, `{"progressToken":%s,"progress":%d,"total":%d,"message":`, progress, i+1, len(c.Steps))
			p = jsonrpc.AppendString(p, fmt.Sprintf("step %d (%s) done", i, tool))
			stream.push(jsonrpc.AppendNotification(nil, "notifications/progress", append(p, '}')), false)
		})
		return jsonrpc.AppendResult(nil, msg.ID, result)
	})
}

// runSteps runs the steps and returns the composite's result.
func (s *Session) runSteps(ctx context.Context, c *config.Composite, input map[string]any, depth int, seq int64, done func(int, string)) json.RawMessage {
	steps := make([]stepResult, 0, len(c.Steps))
	env := templateEnv{input: input}
	for i, step := range c.Steps {
		env.steps = steps
		args, err := env.expand(step.Arguments)
		if err != nil {
			return errorResult("composite %q step %d (%s): %v", c.Name, i, step.Tool, err)
		}
		params := rawJSON(map[string]any{"name": step.Tool, "arguments": args})
		id := jsonrpc.AppendString(nil, fmt.Sprintf("%s%d-%d-%d", stepIDPrefix, depth, seq, i))
		req := &jsonrpc.Message{JSONRPC: "2.0", ID: id, Method: "tools/call", Params: params}
		resp, err := s.internalCall(ctx, req, s.stepOp(ctx, req, c.Name, i))
		if err != nil {
			return errorResult("composite %q step %d (%s): %v", c.Name, i, step.Tool, err)
		}
		if resp.Error != nil {
			e := jsonrpc.DecodeError(resp.Error)
			return errorResult("composite %q step %d (%s) failed: %s (code %d)", c.Name, i, step.Tool, e.Message, e.Code)
		}
		r := decodeStep(resp.Result)
		if isErr, _, _ := jsonrpc.Lookup(resp.Result, "isError"); string(isErr) == "true" {
			return errorResult("composite %q step %d (%s) failed: %s", c.Name, i, step.Tool, r.text)
		}
		steps = append(steps, r)
		done(i, step.Tool)
	}
	env.steps = steps
	switch m := stepSelect.FindStringSubmatch(c.Result); {
	case c.Result == "":
		return steps[len(steps)-1].raw
	case m != nil:
		n, _ := strconv.Atoi(m[1])
		return steps[n].raw
	}
	text, err := env.expandString(c.Result)
	if err != nil {
		return errorResult("composite %q result: %v", c.Name, err)
	}
	return rawJSON(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
}

var stepSelect = regexp.MustCompile(`^steps\.([0-9]+)$`)

// Steps are requests of the session with ids "mcpgate-composite-dDEPTH-…",
// which tell a composite called by a step how deep it is nested.
const (
	stepIDPrefix      = "mcpgate-composite-d"
	maxCompositeDepth = 4
)

// compositeDepth returns how many composites are running around the
// request with this id: 0 for a client's own request.
func compositeDepth(id json.RawMessage) int {
	s, ok := jsonrpc.StringValue(id)
	if !ok {
		return 0
	}
	rest, ok := strings.CutPrefix(s, stepIDPrefix)
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, "-")
	n, _ := strconv.Atoi(digits)
	return n
}

// internalCall sends one request through the session's own routing, as if
// the client had sent it, and waits for its answer; op, if not nil, is
// the request's, ended by its answer.
func (s *Session) internalCall(ctx context.Context, msg *jsonrpc.Message, op *telemetry.Op) (*jsonrpc.Message, error) {
	st := newStream(0, false, s.g.opts.MaxStreamEvents)
	st.internal = true
	st.addOp(op)
	s.HandleRequest(msg, st)
	var after int64
	for {
		events, _, err := st.Wait(ctx, after)
		if err != nil {
			s.mu.Lock()
			c := s.calls[string(msg.ID)]
			s.mu.Unlock()
			if c != nil {
				c.cancel("the composite was cancelled")
			} else {
				s.g.cancelLocal(s, msg.ID) // a cli tool or a composite
			}
			return nil, fmt.Errorf("cancelled: %w", err)
		}
		for _, e := range events {
			after = e.Seq
			if e.Final {
				return jsonrpc.Parse(e.Data)
			}
		}
	}
}

func decodeStep(raw json.RawMessage) stepResult {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent any `json:"structuredContent"`
	}
	_ = json.Unmarshal(raw, &r)
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return stepResult{raw: raw, structured: r.StructuredContent, text: strings.Join(texts, "\n")}
}

func errorResult(format string, args ...any) json.RawMessage {
	return rawJSON(map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf(format, args...)}}, "isError": true})
}
