// Demoserver is a small offline MCP stdio server that `make run` puts behind mcpgate.
//
// It offers the tools echo, add, now and random_quote, the resource
// demo://about and the prompt haiku, speaking newline-delimited JSON-RPC 2.0
// on stdin/stdout (MCP 2025-11-25, 2025-06-18 and 2025-03-26). It needs no
// network and no time zone files.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"time"
	_ "time/tzdata" // now works on machines without /usr/share/zoneinfo
)

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}

// run serves until stdin ends and returns the exit code.
func run(stdin io.Reader, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	s := &server{log: log, now: time.Now, pick: rand.IntN}
	if err := s.serve(stdin, stdout); err != nil {
		log.Error("demoserver stopped", "err", err)
		return 1
	}
	return 0
}

// server answers one client, one request at a time.
type server struct {
	log  *slog.Logger
	now  func() time.Time
	pick func(n int) int // random index in [0, n)
}

// request is an incoming JSON-RPC request or notification.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// response is an outgoing JSON-RPC response.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

// JSON-RPC and MCP error codes.
const (
	codeMethodNotFound   = -32601
	codeInvalidParams    = -32602
	codeResourceNotFound = -32002
)

// serve reads one message per line from in and writes answers to out.
func (s *server) serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		line, err := r.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if resp := s.handle(line); resp != nil {
				if err := enc.Encode(resp); err != nil {
					return fmt.Errorf("write stdout: %w", err)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
	}
}

// handle answers one line; notifications and responses get no answer.
func (s *server) handle(line []byte) *response {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		s.log.Warn("ignoring a line that is not JSON", "err", err)
		return nil
	}
	if req.ID == nil || req.Method == "" {
		return nil
	}
	result, err := s.dispatch(req.Method, req.Params)
	resp := &response{JSONRPC: "2.0", ID: req.ID, Result: result}
	if err != nil {
		var rerr *rpcError
		if !errors.As(err, &rerr) {
			rerr = &rpcError{Code: -32603, Message: err.Error()}
		}
		resp.Result, resp.Error = nil, rerr
	}
	return resp
}

func (s *server) dispatch(method string, params json.RawMessage) (any, error) {
	switch method {
	case "initialize":
		return s.initialize(params)
	case "ping":
		return struct{}{}, nil
	case "tools/list":
		return map[string]any{"tools": toolList()}, nil
	case "tools/call":
		return s.callTool(params)
	case "resources/list":
		return map[string]any{"resources": []map[string]string{{
			"uri": aboutURI, "name": "about", "title": "About this demo",
			"description": "What this demo server is and how to try it.", "mimeType": "text/markdown",
		}}}, nil
	case "resources/read":
		return readResource(params)
	case "prompts/list":
		return map[string]any{"prompts": []map[string]any{{
			"name": "haiku", "title": "Write a haiku",
			"description": "Asks the model for a haiku about a topic.",
			"arguments":   []map[string]any{{"name": "topic", "description": "What the haiku is about.", "required": true}},
		}}}, nil
	case "prompts/get":
		return getPrompt(params)
	default:
		return nil, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + method}
	}
}

func (s *server) initialize(params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "initialize: " + err.Error()}
	}
	version := "2025-11-25"
	if slices.Contains([]string{"2025-11-25", "2025-06-18", "2025-03-26"}, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": struct{}{}, "resources": struct{}{}, "prompts": struct{}{}},
		"serverInfo":      map[string]string{"name": "mcpgate-demo", "title": "mcpgate demo server", "version": "1.0.0"},
		"instructions":    "A friendly offline demo: echo text, add numbers, tell the time in any IANA zone, or fetch a quote.",
	}, nil
}

// aboutURI is the demo's one resource.
const aboutURI = "demo://about"

const aboutText = `# mcpgate demo server

This server runs behind mcpgate as the backend "demo". Its tools appear
through the gateway with the prefix "demo__": demo__echo, demo__add,
demo__now and demo__random_quote. It works entirely offline.
`

func readResource(params json.RawMessage) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "resources/read: " + err.Error()}
	}
	if p.URI != aboutURI {
		return nil, &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("resource %q not found; the only one is %s", p.URI, aboutURI)}
	}
	return map[string]any{"contents": []map[string]string{{"uri": aboutURI, "mimeType": "text/markdown", "text": aboutText}}}, nil
}

func getPrompt(params json.RawMessage) (any, error) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "prompts/get: " + err.Error()}
	}
	if p.Name != "haiku" {
		return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("prompt %q not found; the only one is haiku", p.Name)}
	}
	topic := p.Arguments["topic"]
	if topic == "" {
		return nil, &rpcError{Code: codeInvalidParams, Message: "prompt haiku needs the argument topic"}
	}
	return map[string]any{
		"description": "A haiku about " + topic,
		"messages": []map[string]any{{
			"role":    "user",
			"content": map[string]string{"type": "text", "text": "Write a haiku about " + topic + "."},
		}},
	}, nil
}
