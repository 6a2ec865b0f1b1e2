package catalog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// MCP Apps: a tool's interactive view is a ui:// resource (mimeType
// text/html;profile=mcp-app) that the tool names in _meta.ui.resourceUri,
// or, as servers before the extension's final form wrote it, in
// _meta["ui/resourceUri"]. Two backends may well serve the same ui://
// URI (two instances of one server do), and a client reads the view by
// its URI: so each backend's ui:// URIs are exposed with its tool_prefix
// after the scheme, as its tools' names are, in its resources, templates
// and in its tools' _meta alike: "ui://weather__forecast/view.html" for
// backend weather's "ui://forecast/view.html". resources/read of an
// exposed URI goes to that backend under its own URI. A backend without a
// prefix keeps its ui:// URIs; a tool of it whose view another backend's
// resource took is hidden, with a conflict that says so, rather than
// shown with another backend's view. The backend's bytes are pinned by
// integrity before this renaming (as before the name prefixing).

// appScheme starts the URI of an MCP Apps view.
const appScheme = "ui://"

// AppMIMEType is the MIME type of an MCP Apps view.
const AppMIMEType = "text/html;profile=mcp-app"

// AppURI returns the URI a backend with prefix exposes its resource uri
// as: a ui:// URI gets the prefix after the scheme; any other is as is.
func AppURI(prefix, uri string) string {
	if prefix == "" || !strings.HasPrefix(uri, appScheme) {
		return uri
	}
	return appScheme + prefix + uri[len(appScheme):]
}

// appOriginal is AppURI's inverse: the backend's own URI of exposed.
func appOriginal(prefix, exposed string) string {
	if prefix == "" {
		return exposed
	}
	if rest, ok := strings.CutPrefix(exposed, appScheme+prefix); ok {
		return appScheme + rest
	}
	return exposed
}

// appMetaPaths are where a tool's _meta names its view.
var appMetaPaths = [][]string{{"_meta", "ui", "resourceUri"}, {"_meta", "ui/resourceUri"}}

// withAppURI returns a tool's object with the view URIs of its _meta as
// the backend with prefix exposes them, and the (exposed) view URI, ""
// when it names none.
func withAppURI(raw json.RawMessage, prefix string) (json.RawMessage, string) {
	view := ""
	for _, path := range appMetaPaths {
		v, span, ok := jsonrpc.LookupPath(raw, path...)
		uri, isString := jsonrpc.StringValue(v)
		if !ok || !isString {
			continue
		}
		exposed := AppURI(prefix, uri)
		if view == "" {
			view = exposed
		}
		if exposed != uri {
			raw = jsonrpc.Replace(raw, span, jsonrpc.AppendString(nil, exposed))
		}
	}
	return raw, view
}

// withURI returns a resource's (or template's) object with its member key
// (uri, uriTemplate) set to exposed, when that is not what it holds.
func withURI(raw json.RawMessage, key, original, exposed string) json.RawMessage {
	if exposed == original {
		return raw
	}
	_, span, ok := jsonrpc.Lookup(raw, key)
	if !ok {
		return raw
	}
	return jsonrpc.Replace(raw, span, jsonrpc.AppendString(nil, exposed))
}

// viewTaken says why a tool of backend must be hidden: the view its
// _meta names is a resource another backend serves under that URI. ""
// when it is not.
func (c *Catalog) viewTaken(backend, name, view string) string {
	if view == "" {
		return ""
	}
	i, listed := c.resources[view]
	if !listed || c.Resources[i].Backend == backend {
		return ""
	}
	return fmt.Sprintf("tool %q of backend %q is hidden: its view %s is a resource of backend %q, which already exposes that uri; give one of them a tool_prefix, which also prefixes its ui:// URIs", name, backend, view, c.Resources[i].Backend)
}

// BackendURI returns the backend that serves uri, as the client knows it,
// and the uri the backend knows it by: a ui:// URI without the backend's
// prefix (see AppURI), any other as it is.
func (c *Catalog) BackendURI(uri string) (owner, original string, ok bool) {
	if i, ok := c.resources[uri]; ok {
		return c.Resources[i].Backend, c.Resources[i].Original, true
	}
	for _, t := range c.Templates {
		if t.match != nil && t.match.MatchString(uri) {
			return t.Backend, appOriginal(c.prefixes[t.Backend], uri), true
		}
	}
	return "", "", false
}

// ExposedURI returns the uri clients know a resource of owner by, which
// the backend calls original.
func (c *Catalog) ExposedURI(owner, original string) string {
	return AppURI(c.prefixes[owner], original)
}
