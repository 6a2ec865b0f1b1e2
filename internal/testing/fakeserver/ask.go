package main

import (
	"encoding/json"
	"strings"
)

// askable are the requests prompts/get and resources/read can send to the
// client first, by short name, with their default params.
var askable = map[string]struct{ method, params string }{
	"sampling":    {"sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello."}}],"maxTokens":100}`},
	"elicitation": {"elicitation/create", `{"message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`},
	"roots":       {"roots/list", ""},
}

// ask sends the client the request named short and returns its answer,
// the result or the error, as JSON text.
func (s *server) ask(short string) (string, error) {
	a, ok := askable[short]
	if !ok {
		return "", invalidParams("cannot ask the client for %q: sampling, elicitation or roots", short)
	}
	resp := s.clientRequest(a.method, nil, json.RawMessage(a.params))
	switch {
	case resp == nil:
		return "", errNoReply
	case resp.Error != nil:
		return string(resp.Error), nil
	}
	return string(resp.Result), nil
}

// getPromptOrAsk is prompts/get; prompt greet with the argument ask
// (sampling, elicitation or roots) first sends that request to the client
// and greets with its answer.
func (s *server) getPromptOrAsk(m *message) (any, error) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Name != "greet" || p.Arguments["ask"] == "" {
		return s.getPrompt(m)
	}
	answer, err := s.ask(p.Arguments["ask"])
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"description": "Greets with what the client answered.",
		"messages": []map[string]any{{
			"role":    "user",
			"content": map[string]string{"type": "text", "text": "Hello, " + answer},
		}},
	}, nil
}

// readResourceOrAsk is resources/read; with --resources, fake://ask/SHORT
// (sampling, elicitation or roots) first sends that request to the client
// and has its answer as contents.
func (s *server) readResourceOrAsk(m *message) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(m.Params, &p)
	short, ok := strings.CutPrefix(p.URI, "fake://ask/")
	if !ok || s.opts.resources == 0 {
		return s.readResource(m)
	}
	answer, err := s.ask(short)
	if err != nil {
		return nil, err
	}
	return map[string]any{"contents": []map[string]string{
		{"uri": p.URI, "mimeType": "application/json", "text": answer},
	}}, nil
}
