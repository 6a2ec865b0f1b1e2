package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// The meta-tools of search mode: tools/list holds these instead of the
// catalog. A tool of the catalog with one of these names stays reachable
// through call_tool.
const (
	FindToolsName = "find_tools"
	CallToolName  = "call_tool"
	AddToolsName  = "add_tools"
)

// Bounds of find_tools.
const (
	defaultFindResults = 5
	maxFindResults     = 20
	maxQueryBytes      = 2000
)

// metaEntries are the meta-tools a view lists: their descriptions name how
// many tools the client can find, and of which backends, so that a model
// knows what to look for (and the list changes when that does). A
// stateless request gets no add_tools: it has no session list to add to.
func (s *Session) metaEntries(v view, cat *catalog.Catalog) []catalog.Entry {
	perBackend := map[string]int{}
	total := 0
	for i := range cat.Tools {
		e := &cat.Tools[i]
		if v.tool(cat, e.Name) {
			perBackend[e.Backend]++
			total++
		}
	}
	var from []string
	for _, b := range slices.Sorted(maps.Keys(perBackend)) {
		name := b
		if b == compositeOwner {
			name = "composites"
		}
		from = append(from, fmt.Sprintf("%s (%d)", name, perBackend[b]))
	}
	find := fmt.Sprintf("Finds the tools for a task among the %d tools this gateway offers you", total)
	if len(from) > 0 {
		find += ", from " + strings.Join(from, ", ")
	}
	find += ". Describe the task in plain words, as you would to a colleague (\"open a GitHub issue about the login crash\", \"list the pods in the cluster\"). " +
		"It returns the best matches, best first, with their full definitions: name, description and input schema. " +
		"Then call the one that fits with " + CallToolName + ", passing its exact name and the arguments its input schema asks for. " +
		"If none fits, search again with other words: what the tool would do, or the service it works with."
	out := []catalog.Entry{
		metaEntry(FindToolsName, "Find tools", find,
			`{"type":"object","properties":{"query":{"type":"string","description":"The task, in plain words."},"limit":{"type":"integer","minimum":1,"maximum":`+strconv.Itoa(maxFindResults)+`,"description":"How many tools to return; default `+strconv.Itoa(defaultFindResults)+`."}},"required":["query"]}`,
			`{"readOnlyHint":true,"openWorldHint":false}`),
		metaEntry(CallToolName, "Call a found tool",
			"Calls a tool that "+FindToolsName+" returned, by its exact name, with the arguments its input schema asks for. "+
				"The result is that tool's own result, and the same rules apply as to calling it directly.",
			`{"type":"object","properties":{"name":{"type":"string","description":"The tool's exact name, as `+FindToolsName+` returned it."},"arguments":{"type":"object","description":"The tool's arguments, as its input schema describes them."}},"required":["name"]}`,
			""),
	}
	if !s.stateless {
		out = append(out, metaEntry(AddToolsName, "Add found tools to the tool list",
			"Adds tools that "+FindToolsName+" returned to your tool list, so that you can call them directly from now on; "+
				"your client is told that the list changed. Add the tools you will use again, at most "+strconv.Itoa(s.profile.Load().maxAdded())+" in all.",
			`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"},"description":"The tools' exact names, as `+FindToolsName+` returned them."}},"required":["names"]}`,
			`{"readOnlyHint":true,"openWorldHint":false}`))
	}
	return out
}

func metaEntry(name, title, description, schema, annotations string) catalog.Entry {
	raw := []byte(`{"name":"` + name + `","title":`)
	raw = jsonrpc.AppendString(raw, title)
	raw = append(raw, `,"description":`...)
	raw = jsonrpc.AppendString(raw, description)
	raw = append(raw, `,"inputSchema":`...)
	raw = append(raw, schema...)
	if annotations != "" {
		raw = append(raw, `,"annotations":`...)
		raw = append(raw, annotations...)
	}
	raw = append(raw, '}')
	return catalog.Entry{Name: name, Original: name, Description: description, Raw: raw}
}

func isMetaTool(name string) bool {
	return name == FindToolsName || name == CallToolName || name == AddToolsName
}

// listedTools is the tools/list a view gets: the tools it shows, or in
// search mode the meta-tools and the tools the session added.
func (s *Session) listedTools(v view, cat *catalog.Catalog) []catalog.Entry {
	if !v.search {
		return v.entries(cat, access.Tools, cat.Tools)
	}
	out := s.metaEntries(v, cat)
	s.mu.Lock()
	added := slices.Clone(s.added)
	s.mu.Unlock()
	for _, name := range added {
		if e, ok := cat.Tool(name); ok && !isMetaTool(name) && v.tool(cat, name) {
			out = append(out, *e)
		}
	}
	return out
}

// metaTool answers a tools/call of a meta-tool in search mode; it reports
// false for any other call, which goes its usual way.
func (s *Session) metaTool(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog, name string) bool {
	if !isMetaTool(name) || !s.view().search || name == AddToolsName && s.stateless {
		return false
	}
	args, _, _ := jsonrpc.Lookup(msg.Params, "arguments")
	switch name {
	case FindToolsName:
		s.findTools(msg, stream, cat, args)
	case CallToolName:
		inner, err := s.innerCall(msg, args)
		if err != nil {
			stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true)
			return true
		}
		s.toolsCall(inner, stream, cat, false, true)
	case AddToolsName:
		s.addTools(msg, stream, cat, args)
	}
	return true
}

// metaArgs finds keys in a meta-tool's arguments, refusing what is not an
// object, or names a member twice.
func metaArgs(tool string, args json.RawMessage, keys []string) ([]json.RawMessage, error) {
	values := make([]json.RawMessage, len(keys))
	if len(args) == 0 || string(args) == "null" {
		return values, nil
	}
	if args[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments must be an object", tool)
	}
	if err := jsonrpc.FindEach(args, keys, values); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments: %v", tool, err)
	}
	return values, nil
}

// innerCall is the tools/call that a call of call_tool stands for: the
// tool it names with its arguments, and the call's own _meta (its
// progress token, a stateless request's protocol version), under the
// call's id. The call then takes the way of any tools/call.
func (s *Session) innerCall(msg *jsonrpc.Message, args json.RawMessage) (*jsonrpc.Message, error) {
	v, err := metaArgs(CallToolName, args, []string{"name", "arguments"})
	if err != nil {
		return nil, err
	}
	name, ok := jsonrpc.StringValue(v[0])
	if !ok || name == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.name must be the name of a tool %s returned", CallToolName, FindToolsName)
	}
	toolArgs := v[1]
	if toolArgs != nil && toolArgs[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.arguments must be an object: the tool's arguments", CallToolName)
	}
	params := jsonrpc.AppendString([]byte(`{"name":`), name)
	if toolArgs != nil {
		params = append(append(params, `,"arguments":`...), toolArgs...)
	}
	if meta, _, ok := jsonrpc.Lookup(msg.Params, "_meta"); ok {
		params = append(append(params, `,"_meta":`...), meta...)
	}
	return &jsonrpc.Message{JSONRPC: "2.0", ID: msg.ID, Method: "tools/call", Params: append(params, '}')}, nil
}

// metaCallTarget returns the tools/call that msg stands for when it is a
// call of call_tool in search mode, else nil.
func (s *Session) metaCallTarget(msg *jsonrpc.Message) *jsonrpc.Message {
	if msg.Method != "tools/call" || !s.view().search {
		return nil
	}
	if name, _, err := stringParam(msg.Params, "name"); err != nil || name != CallToolName {
		return nil
	}
	args, _, _ := jsonrpc.Lookup(msg.Params, "arguments")
	inner, err := s.innerCall(msg, args)
	if err != nil {
		return nil
	}
	return inner
}

// findTools answers find_tools: the tools of the view that match the
// query best, with their definitions.
func (s *Session) findTools(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog, args json.RawMessage) {
	fail := func(err error) { stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true) }
	v, err := metaArgs(FindToolsName, args, []string{"query", "limit"})
	if err != nil {
		fail(err)
		return
	}
	query, ok := jsonrpc.StringValue(v[0])
	switch {
	case !ok || strings.TrimSpace(query) == "":
		fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.query must be the task, in words", FindToolsName))
		return
	case len(query) > maxQueryBytes:
		fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.query has %d bytes; describe the task in at most %d", FindToolsName, len(query), maxQueryBytes))
		return
	}
	limit := defaultFindResults
	if v[1] != nil {
		n, err := strconv.Atoi(string(v[1]))
		if err != nil || n < 1 || n > maxFindResults {
			fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.limit must be a whole number from 1 to %d", FindToolsName, maxFindResults))
			return
		}
		limit = n
	}
	view := s.view()
	hits := s.g.toolIndex(cat).Search(query, limit, func(doc int) bool {
		return !isMetaTool(cat.Tools[doc].Name) && view.tool(cat, cat.Tools[doc].Name)
	})
	text := []byte(`{"tools":[`)
	for i, h := range hits {
		if i > 0 {
			text = append(text, ',')
		}
		text = append(text, cat.Tools[h.Doc].Raw...)
	}
	text = append(text, "]}"...)
	if len(hits) == 0 {
		text = []byte(fmt.Sprintf("No tool matches %q. Search again with other words: what the tool would do, or the service it works with.", query))
	}
	stream.push(jsonrpc.AppendResult(nil, msg.ID, textResult(string(text), false)), true)
}

// addTools answers add_tools: the tools named join the session's list,
// and its client is told the list changed.
func (s *Session) addTools(msg *jsonrpc.Message, stream *Stream, cat *catalog.Catalog, args json.RawMessage) {
	v, err := metaArgs(AddToolsName, args, []string{"names"})
	var names []string
	if err == nil && (v[0] == nil || json.Unmarshal(v[0], &names) != nil || len(names) == 0) {
		err = jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.names must be an array of the names of tools %s returned", AddToolsName, FindToolsName)
	}
	if err != nil {
		stream.push(jsonrpc.AppendError(nil, msg.ID, jsonrpc.AsError(err)), true)
		return
	}
	view := s.view()
	limit := s.profile.Load().maxAdded()
	var added, unknown, over []string
	s.mu.Lock()
	for _, name := range names {
		_, found := cat.Tool(name)
		switch {
		case !found || isMetaTool(name) || !view.tool(cat, name):
			if found && !isMetaTool(name) {
				defer s.journalHidden(s.op(msg, stream).Context(), "tools/call", "tool", access.Tools, name) // journaled outside the lock
			}
			unknown = append(unknown, name)
		case slices.Contains(s.added, name):
			added = append(added, name)
		case len(s.added) >= limit:
			over = append(over, name)
		default:
			s.added = append(s.added, name)
			added = append(added, name)
		}
	}
	s.mu.Unlock()
	var text []string
	if len(added) > 0 {
		s.listChanged("notifications/tools/list_changed")
		text = append(text, "In your tool list now: "+strings.Join(added, ", ")+". If your client does not show them, call them with "+CallToolName+".")
	}
	if len(unknown) > 0 {
		text = append(text, "Unknown tools, not added: "+strings.Join(unknown, ", ")+"; use the names "+FindToolsName+" returns.")
	}
	if len(over) > 0 {
		text = append(text, fmt.Sprintf("Not added, the list holds at most %d added tools: %s; call them with %s.", limit, strings.Join(over, ", "), CallToolName))
	}
	stream.push(jsonrpc.AppendResult(nil, msg.ID, textResult(strings.Join(text, " "), len(added) == 0)), true)
}

// textResult is a tool result of one text.
func textResult(text string, isError bool) json.RawMessage {
	out := jsonrpc.AppendString([]byte(`{"content":[{"type":"text","text":`), text)
	out = append(out, "}]"...)
	if isError {
		out = append(out, `,"isError":true`...)
	}
	return append(out, '}')
}
