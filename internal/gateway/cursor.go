package gateway

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// page answers a list request with one page of the catalog.
func (s *Session) page(msg *jsonrpc.Message, stream *Stream, key string, n int, item func(int) []byte) {
	start := 0
	if raw, _, ok := jsonrpc.Lookup(msg.Params, "cursor"); ok && string(raw) != "null" {
		var err error
		if start, err = decodeCursor(raw, n); err != nil {
			stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid cursor: %v", err)), true)
			return
		}
	}
	end := min(start+s.g.opts.PageSize, n)
	out := append([]byte(`{"`), key...)
	out = append(out, `":[`...)
	for i := start; i < end; i++ {
		if i > start {
			out = append(out, ',')
		}
		out = append(out, item(i)...)
	}
	out = append(out, ']')
	if end < n {
		out = append(out, `,"nextCursor":`...)
		out = jsonrpc.AppendString(out, encodeCursor(end))
	}
	out = append(out, '}')
	stream.push(jsonrpc.AppendResult(nil, msg.ID, out), true)
}

func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("mcpgate:" + strconv.Itoa(offset)))
}

func decodeCursor(raw json.RawMessage, n int) (int, error) {
	text, ok := jsonrpc.StringValue(raw)
	if !ok {
		return 0, errors.New("not a string")
	}
	b, err := base64.RawURLEncoding.DecodeString(text)
	rest, found := strings.CutPrefix(string(b), "mcpgate:")
	if err != nil || !found {
		return 0, errors.New("not a cursor this gateway issued")
	}
	offset, err := strconv.Atoi(rest)
	if err != nil || offset < 0 || offset > n {
		return 0, errors.New("out of range; the list may have changed, start again without a cursor")
	}
	return offset, nil
}

// list answers one of the list methods from the catalog, with what the
// session's view (its client's policy and profile) shows.
func (s *Session) list(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog) {
	switch msg.Method {
	case "tools/list":
		tools := s.listedTools(s.view(), cat)
		s.page(msg, stream, "tools", len(tools), func(i int) []byte { return tools[i].Raw })
	case "prompts/list":
		prompts := s.view().entries(cat, access.Prompts, cat.Prompts)
		s.page(msg, stream, "prompts", len(prompts), func(i int) []byte { return prompts[i].Raw })
	case "resources/list":
		resources := s.view().resources(cat.Resources)
		s.page(msg, stream, "resources", len(resources), func(i int) []byte { return resources[i].Raw })
	case "resources/templates/list":
		templates := s.view().resources(cat.Templates)
		s.page(msg, stream, "resourceTemplates", len(templates), func(i int) []byte { return templates[i].Raw })
	}
}
