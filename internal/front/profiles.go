package front

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

type profileKey struct{}

// endpointOf says which MCP endpoint path is: the endpoint itself ("",
// true), the path of a configured profile below it (its name, true), or
// none of them (false).
func (h *Handler) endpointOf(path string) (profile string, ok bool) {
	if path == h.opts.Endpoint {
		return "", true
	}
	name, below := strings.CutPrefix(path, strings.TrimSuffix(h.opts.Endpoint, "/")+"/")
	if !below || name == "" || !h.g.HasProfile(name) {
		return "", false
	}
	return name, true
}

// notFound answers a path that is no endpoint, naming the ones there are.
func (h *Handler) notFound(w http.ResponseWriter, path string) {
	prefix := strings.TrimSuffix(h.opts.Endpoint, "/") + "/"
	names := h.g.ProfileNames()
	msg := fmt.Sprintf("not found: the MCP endpoint is %s", h.opts.Endpoint)
	if len(names) > 0 {
		msg += fmt.Sprintf(", and its profiles are at %s{%s}", prefix, strings.Join(names, ","))
	}
	if name, below := strings.CutPrefix(path, prefix); below && name != "" {
		msg = fmt.Sprintf("not found: no profile %q is configured; ", name) + strings.TrimPrefix(msg, "not found: ")
	}
	http.Error(w, msg, http.StatusNotFound)
}

// withProfile records in r the profile its path names; the endpoint's
// own requests are left as they are.
func withProfile(r *http.Request, profile string) *http.Request {
	if profile == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), profileKey{}, profile))
}

// profileOf returns the profile r's path named, "" for the endpoint.
func profileOf(r *http.Request) string {
	p, _ := r.Context().Value(profileKey{}).(string)
	return p
}
