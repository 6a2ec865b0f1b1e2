package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// resourcePrefix starts the URI of every fake resource.
const resourcePrefix = "fake://r/"

type resource struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MIMEType string `json:"mimeType"`
}

func (s *server) listResources(m *message) (any, error) {
	all := make([]resource, s.opts.resources)
	for i := range all {
		all[i] = resource{URI: resourcePrefix + strconv.Itoa(i), Name: "r" + strconv.Itoa(i), MIMEType: "text/plain"}
	}
	items, next, err := page(s, m.Params, all)
	if err != nil {
		return nil, err
	}
	return listResult("resources", items, next), nil
}

func (s *server) listResourceTemplates(m *message) (any, error) {
	all := []map[string]string{{"uriTemplate": resourcePrefix + "{index}", "name": "r", "mimeType": "text/plain"}}
	items, next, err := page(s, m.Params, all)
	if err != nil {
		return nil, err
	}
	return listResult("resourceTemplates", items, next), nil
}

// resourceURI reads the uri parameter and checks that the resource exists.
func (s *server) resourceURI(params json.RawMessage) (string, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return "", invalidParams("bad params: %v", err)
	}
	rest, ok := strings.CutPrefix(p.URI, resourcePrefix)
	i, err := strconv.Atoi(rest)
	if !ok || err != nil || i < 0 || i >= s.opts.resources || strconv.Itoa(i) != rest {
		return "", &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("resource not found: %q", p.URI)}
	}
	return p.URI, nil
}

func (s *server) readResource(m *message) (any, error) {
	uri, err := s.resourceURI(m.Params)
	if err != nil {
		return nil, err
	}
	return map[string]any{"contents": []map[string]string{
		{"uri": uri, "mimeType": "text/plain", "text": "contents of " + uri},
	}}, nil
}

func (s *server) subscribe(m *message) (any, error) {
	uri, err := s.resourceURI(m.Params)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.subscriptions[uri] = true
	s.mu.Unlock()
	return nil, nil
}

func (s *server) unsubscribe(m *message) (any, error) {
	uri, err := s.resourceURI(m.Params)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.subscriptions, uri)
	s.mu.Unlock()
	return nil, nil
}

func (s *server) listPrompts(m *message) (any, error) {
	all := []map[string]any{{
		"name":        "greet",
		"description": "Greets someone by name.",
		"arguments":   []map[string]any{{"name": "name", "description": "Who to greet.", "required": true}},
	}}
	items, next, err := page(s, m.Params, all)
	if err != nil {
		return nil, err
	}
	return listResult("prompts", items, next), nil
}

func (s *server) getPrompt(m *message) (any, error) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams("bad params: %v", err)
	}
	if p.Name != "greet" {
		return nil, invalidParams("unknown prompt %q", p.Name)
	}
	who, ok := p.Arguments["name"]
	if !ok {
		return nil, invalidParams("prompt greet needs the argument name")
	}
	return map[string]any{
		"description": "Greets " + who + ".",
		"messages": []map[string]any{{
			"role":    "user",
			"content": map[string]string{"type": "text", "text": "Hello, " + who + "!"},
		}},
	}, nil
}

// greetNames are the completion candidates for the greet prompt's argument.
func greetNames() []string { return []string{"Ada", "Alan", "Alice", "Bob", "Carol"} }

func (s *server) complete(m *message) (any, error) {
	var p struct {
		Ref struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"ref"`
		Argument struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"argument"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, invalidParams("bad params: %v", err)
	}
	if p.Ref.Type != "ref/prompt" || p.Ref.Name != "greet" || p.Argument.Name != "name" {
		return nil, invalidParams("nothing to complete for %s %q argument %q", p.Ref.Type, p.Ref.Name, p.Argument.Name)
	}
	values := []string{}
	for _, n := range greetNames() {
		if strings.HasPrefix(strings.ToLower(n), strings.ToLower(p.Argument.Value)) {
			values = append(values, n)
		}
	}
	return map[string]any{"completion": map[string]any{"values": values, "total": len(values), "hasMore": false}}, nil
}
