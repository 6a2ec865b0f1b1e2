package front

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/journal"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// HTTP headers of MCP 2026-07-28, which mirror parts of the body so that
// intermediaries can route on them; the gateway checks they agree.
const (
	headerMethod = "Mcp-Method"
	headerName   = "Mcp-Name"
)

// The era of a request is a property of the request: a POST without
// Mcp-Session-Id whose params carry _meta's protocol version (or whose
// MCP-Protocol-Version header names a version no session speaks) is a
// stateless 2026-07-28 request; anything else is served as 2025 sessions
// are.

// isModern reports whether a POST without a session is a stateless
// request. An initialize is one too when it carries 2026-07-28's _meta
// or header: that revision has no initialize, and its client must learn
// so (404, -32601) rather than get a 2025 session it did not ask for; an
// initialize without them starts a 2025 session.
func isModern(hdr http.Header, msg *jsonrpc.Message, head *gateway.RequestHead) bool {
	if head.Version != nil || modernHeader(hdr) {
		return true
	}
	// Ambiguous params count too, refused as a malformed stateless
	// request, except in an initialize, which starts a session as it
	// always did.
	return head.Err != nil && msg.Method != "initialize"
}

// modernHeader reports whether the MCP-Protocol-Version header names a
// version that is not one of the 2025 sessions'.
func modernHeader(hdr http.Header) bool {
	v := get(hdr, headerProtocol)
	return v != "" && !gateway.SupportsProtocolVersion(v)
}

// get is hdr.Get(key) for a key in canonical form, as the header names
// this package uses are (TestHeaderNamesCanonical): the map is read
// without the key canonicalized again on every request.
func get(hdr http.Header, key string) string {
	if v := hdr[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// refusal is why a stateless request is refused before routing: the HTTP
// status and the JSON-RPC error.
type refusal struct {
	status int
	err    *jsonrpc.Error
}

func refuse(status, code int, format string, args ...any) *refusal {
	return &refusal{status, jsonrpc.Errorf(code, format, args...)}
}

// nameHeaderMethods are the methods whose Mcp-Name header mirrors a member
// of params.
var nameHeaderMethods = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
	"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}

// checkModern checks a stateless request's _meta and its headers against
// each other, as 2026-07-28 demands, and returns what _meta declares. hdr
// and msg are the client's: untrusted; head is ScanHead of msg.Params.
func checkModern(hdr http.Header, msg *jsonrpc.Message, head *gateway.RequestHead) (gateway.RequestMeta, *refusal) {
	meta := gateway.RequestMeta{Head: *head}
	if head.Err != nil {
		return meta, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params: %v", head.Err)
	}
	values := [3]json.RawMessage{head.Version, head.Capabilities, head.LogLevel}
	version, ok := versionValue(values[0])
	if !ok {
		return meta, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
			"params._meta[%q] must be the protocol version, a string: every request of MCP %s carries it (or send initialize to start a 2025 session)",
			gateway.MetaProtocolVersion, gateway.ModernProtocolVersion)
	}
	switch hv := hdr[headerProtocol]; {
	case len(hv) != 1:
		return meta, refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: send exactly one %s header, equal to params._meta[%q]", headerProtocol, gateway.MetaProtocolVersion)
	case hv[0] != version:
		return meta, refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: %s header %q does not match params._meta[%q] %q", headerProtocol, hv[0], gateway.MetaProtocolVersion, version)
	}
	if !gateway.IsModernVersion(version) {
		r := refuse(http.StatusBadRequest, gateway.CodeUnsupportedProtocolVersion,
			"unsupported protocol version %q: requests without a session speak %s; versions %s need a session, started with initialize",
			version, gateway.ModernProtocolVersion, strings.Join(gateway.SupportedVersions()[1:], ", "))
		data := []byte(`{"supported":["` + strings.Join(gateway.SupportedVersions(), `","`) + `"],"requested":`)
		r.err.Data = append(jsonrpc.AppendString(data, version), '}')
		return meta, r
	}
	if c := values[1]; len(c) == 0 || c[0] != '{' {
		return meta, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params._meta[%q] must be an object: every request of MCP %s carries the client's capabilities", gateway.MetaClientCapabilities, version)
	}
	if values[2] != nil {
		level, ok := jsonrpc.StringValue(values[2])
		if _, known := journal.MCPLevelPriority(level); !ok || !known || level != strings.ToLower(level) {
			return meta, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params._meta[%q] must be one of debug, info, notice, warning, error, critical, alert, emergency", gateway.MetaLogLevel)
		}
		meta.LogLevel = level
	}
	meta.Protocol, meta.Capabilities, meta.Header = version, values[1], hdr
	switch hv := hdr[headerMethod]; {
	case len(hv) != 1:
		return meta, refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: send exactly one %s header, equal to the request's method", headerMethod)
	case hv[0] != msg.Method:
		return meta, refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: %s header %q does not match the method %q", headerMethod, hv[0], msg.Method)
	}
	if member, ok := nameHeaderMethods[msg.Method]; ok {
		raw := head.Name
		switch member {
		case "uri":
			raw = head.URI
		case "taskId": // MCP Tasks: not in the head, which routing of calls reads
			raw, _, _ = jsonrpc.Lookup(msg.Params, "taskId")
		}
		if r := checkName(hdr[headerName], raw, member); r != nil {
			return meta, r
		}
	}
	return meta, nil
}

// checkName checks the Mcp-Name header against params' member (the name
// of a tool or prompt, the uri of a resource).
func checkName(hv []string, raw []byte, member string) *refusal {
	if len(hv) != 1 {
		return refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: send exactly one %s header, equal to params.%s", headerName, member)
	}
	name, ok := decodeHeaderValue(hv[0])
	if !ok {
		return refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: %s header is malformed: use visible ASCII, or =?base64?...?= for anything else", headerName)
	}
	if !equalString(raw, name) {
		return refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: %s header does not match params.%s", headerName, member)
	}
	return nil
}

// versionValue is jsonrpc.StringValue for a protocol version, without
// allocating for the one served statelessly.
func versionValue(raw []byte) (string, bool) {
	if len(raw) == len(gateway.ModernProtocolVersion)+2 && string(raw[1:len(raw)-1]) == gateway.ModernProtocolVersion && raw[0] == '"' {
		return gateway.ModernProtocolVersion, true
	}
	return jsonrpc.StringValue(raw)
}

// equalString reports whether raw is a JSON string whose value is s,
// without allocating when raw needs no decoding.
func equalString(raw []byte, s string) bool {
	if len(raw) >= 2 && raw[0] == '"' && len(raw)-2 == len(s) && string(raw[1:len(raw)-1]) == s && !strings.Contains(s, `\`) {
		return true // the same bytes, and no escape: the same string
	}
	v, ok := jsonrpc.StringValue(raw)
	return ok && v == s
}

// decodeHeaderValue returns the value an Mcp-Name header carries (see
// gateway.DecodeHeaderValue).
func decodeHeaderValue(v string) (string, bool) { return gateway.DecodeHeaderValue(v) }

// modernStatus is the HTTP status of the answer to a stateless request
// whose response carries error code (0 for a result).
func modernStatus(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case gateway.CodeMissingClientCapability, gateway.CodeHeaderMismatch, gateway.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// stateless serves a stateless (2026-07-28) request: checked against its
// headers, then routed as a session's request is, with a context that
// lives as long as the request.
// A subscriptions/listen stream lasts as long as its client wants: it
// gives back its max_concurrent_requests slot (*held) once admitted, and
// counts as a session instead.
func (h *Handler) stateless(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, head *gateway.RequestHead, sse bool, held *bool) {
	switch {
	case msg.IsNotification():
		// 2026-07-28 defines no notification from the client over HTTP:
		// closing a response stream is what cancels its request.
		w.WriteHeader(http.StatusAccepted)
		return
	case msg.IsResponse():
		h.rpcError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "a client speaking MCP %s sends no responses: the gateway sends it no requests", gateway.ModernProtocolVersion)
		return
	}
	meta, refused := checkModern(r.Header, msg, head)
	if msg.Method == "initialize" {
		// Whatever else is wrong with it, the method is the first thing
		// a client speaking 2026-07-28 to a 2025 habit must hear about.
		refused = refuse(http.StatusNotFound, jsonrpc.CodeMethodNotFound,
			"method not found: initialize (MCP %s has no initialize: every request carries its version in _meta; a 2025 session starts with an initialize that carries neither that _meta nor %s %s)",
			gateway.ModernProtocolVersion, headerProtocol, gateway.ModernProtocolVersion)
	}
	if refused != nil {
		h.log.Debug("refused a stateless request: "+refused.err.Message, "client", clientOf(r).Name, "method", msg.Method)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(refused.status)
		resp := jsonrpc.AppendError(nil, msg.ID, refused.err)
		w.Write(resp)
		if t := h.opts.Telemetry; t != nil {
			op := t.Server(h.traceContext(r), msg.Method, msg.ID, msg.Params)
			op.SetCaller(clientOf(r).Name, identityOf(r))
			op.SetProtocol(meta.Protocol)
			op.End(resp)
		}
		return
	}
	if h.g.Draining() {
		// 503 lets a balancer send the request to another host.
		h.rpcError(w, http.StatusServiceUnavailable, msg.ID, gateway.CodeShuttingDown, "the gateway is shutting down; send the request again to reach another host")
		return
	}
	if msg.Method == "subscriptions/listen" && *held {
		*held = false
		h.release()
	}
	meta.Profile = profileOf(r)
	sess := h.g.StatelessRequest(meta, clientOf(r), identityOf(r))
	defer sess.End()
	st := sess.NewStream(1, sse)
	sess.HandleRequestContext(h.traceContext(r), msg, st)
	h.answer(w, r, sess, st, false)
}

// sessionless answers a GET or DELETE of a 2026-07-28 client, which has no
// session to stream or end: 405, as that revision says.
func (h *Handler) sessionless(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	h.httpError(w, http.StatusMethodNotAllowed, "MCP %s has no %s: POST subscriptions/listen for notifications", gateway.ModernProtocolVersion, r.Method)
}
