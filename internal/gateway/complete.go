package gateway

import (
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// complete routes completion/complete by the prompt or resource it refers to.
func (s *Session) complete(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog) {
	fail := func(format string, args ...any) {
		stream.push(errorResponse(msg.ID, jsonrpc.CodeInvalidParams, format, args...), true)
	}
	ref, refSpan, ok := jsonrpc.Lookup(msg.Params, "ref")
	if !ok {
		fail("params.ref is missing")
		return
	}
	refType, _, _ := stringParam(ref, "type")
	switch refType {
	case "ref/prompt":
		name, span, err := stringParam(ref, "name")
		if err != nil {
			fail("params.ref.name must be a string")
			return
		}
		prompt, ok := cat.Prompt(name)
		if !ok || !s.view().prompt(cat, name) {
			fail("unknown prompt %q", name)
			return
		}
		newRef := renamed(ref, span, name, prompt.Original)
		s.forwardTo(msg, stream, prompt.Backend, jsonrpc.Replace(msg.Params, refSpan, newRef))
	case "ref/resource":
		uri, _, err := stringParam(ref, "uri")
		if err != nil {
			fail("params.ref.uri must be a string")
			return
		}
		v := s.view()
		for _, t := range cat.Templates {
			if t.URI == uri && v.resource(t.Backend, uri) {
				s.forwardTo(msg, stream, t.Backend, msg.Params)
				return
			}
		}
		if owner, ok := cat.ResourceOwner(uri); ok && v.resource(owner, uri) {
			s.forwardTo(msg, stream, owner, msg.Params)
			return
		}
		fail("no backend serves the resource or template %q", uri)
	default:
		fail("params.ref.type must be ref/prompt or ref/resource")
	}
}
