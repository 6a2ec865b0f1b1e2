package gateway

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// MCP Apps views (ui:// resources) are exposed under their backend's
// prefix (see catalog/apps.go): what goes to the backend carries its own
// URI, and what comes back the exposed one. Policy and profiles decide on
// the exposed URI, as they do on prefixed tool names; an App's own calls
// back into tools are tools/call requests of its host's session, checked
// as any.

// backendURI returns the backend serving uri, as the client names it,
// and the URI to send it: the one the backend knows the resource by.
func (g *Gateway) backendURI(cat *catalog.Catalog, uri string) (owner, original string, ok bool) {
	if owner, original, ok := cat.BackendURI(uri); ok {
		return owner, original, true
	}
	owner, ok = g.resourceOwner(cat, uri)
	return owner, uri, ok
}

// withBackendURI returns params (of resources/read, subscribe,
// unsubscribe) with the uri member as the backend knows it.
func withBackendURI(params json.RawMessage, exposed, original string) json.RawMessage {
	if exposed == original {
		return params
	}
	_, span, ok := jsonrpc.Lookup(params, "uri")
	if !ok {
		return params
	}
	return jsonrpc.Replace(params, span, jsonrpc.AppendString(nil, original))
}

// exposedContents returns a resources/read result with the uri of each
// of its contents that is the backend's original as the client asked for
// it, exposed.
func exposedContents(result json.RawMessage, original, exposed string) json.RawMessage {
	list, span, ok := jsonrpc.Lookup(result, "contents")
	if !ok {
		return result
	}
	var items []json.RawMessage
	if json.Unmarshal(list, &items) != nil {
		return result
	}
	changed := false
	for i, item := range items {
		v, vspan, ok := jsonrpc.Lookup(item, "uri")
		if uri, _ := jsonrpc.StringValue(v); ok && uri == original {
			items[i] = jsonrpc.Replace(item, vspan, jsonrpc.AppendString(nil, exposed))
			changed = true
		}
	}
	if !changed {
		return result
	}
	out := []byte{'['}
	for i, item := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, item...)
	}
	return jsonrpc.Replace(result, span, append(out, ']'))
}

// exposedUpdate returns a backend's notifications/resources/updated params
// with the uri as clients know it, and that uri.
func exposedUpdate(cat *catalog.Catalog, owner string, params json.RawMessage) (json.RawMessage, string, bool) {
	v, span, ok := jsonrpc.Lookup(params, "uri")
	original, isString := jsonrpc.StringValue(v)
	if !ok || !isString {
		return params, "", false
	}
	exposed := cat.ExposedURI(owner, original)
	if exposed == original {
		return params, original, true
	}
	return jsonrpc.Replace(params, span, jsonrpc.AppendString(nil, exposed)), exposed, true
}
