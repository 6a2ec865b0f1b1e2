package front

import (
	"net/http"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/internal/access"
)

// serveMetadata answers a request for the RFC 9728 protected resource
// metadata, when OAuth is on, and reports whether it did. The metadata is
// public, as the 401 that points to it is: browsers' clients may read it
// from any origin.
func (h *Handler) serveMetadata(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.Clients == nil || r.URL.RawPath != "" || !strings.HasPrefix(r.URL.Path, access.MetadataPath) {
		return false
	}
	o := h.opts.Clients().OAuth()
	if o == nil || !slices.Contains(o.MetadataPaths(), r.URL.Path) {
		return false
	}
	if !h.hostAllowed(r.Host) {
		h.httpError(w, http.StatusForbidden, "Host %q is not allowed; add it to allowed_hosts in the [gateway] section to serve it", r.Host)
		return true
	}
	if h.readOnly(w, r, "Mcp-Protocol-Version", "the resource metadata") {
		return true
	}
	// The resource is the listener's, fixed at start: the same document
	// whatever the request says, so it may be cached.
	resource := o.Resource(access.PeerFrom(r.Context()))
	if resource == "" {
		h.httpError(w, http.StatusNotFound, "no OAuth resource is known for this listener; an administrator can set resource in the [oauth] section")
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Write(o.Metadata(resource))
	return true
}

// readOnly makes a public document readable from any origin, answers
// its CORS preflight (allowing allowHeaders) and refuses every method but
// GET and HEAD, saying how what is read. It reports whether it answered
// the request.
func (h *Handler) readOnly(w http.ResponseWriter, r *http.Request, allowHeaders, what string) bool {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return false
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET")
		w.Header().Set("Access-Control-Allow-Headers", allowHeaders)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, HEAD")
		h.httpError(w, http.StatusMethodNotAllowed, "method %s not allowed; %s is read with GET", r.Method, what)
	}
	return true
}
