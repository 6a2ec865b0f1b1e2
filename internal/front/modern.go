package front

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

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
// request.
func isModern(hdr http.Header, msg *jsonrpc.Message) bool {
	if msg.IsRequest() && msg.Method == "initialize" {
		return false // a 2025 session starts, whatever else it carries
	}
	// An ambiguous or malformed _meta counts too: it is refused as a
	// malformed stateless request.
	if v, _, err := jsonrpc.FindPath(msg.Params, "_meta", gateway.MetaProtocolVersion); err != nil || v != nil {
		return true
	}
	return modernHeader(hdr)
}

// modernHeader reports whether the MCP-Protocol-Version header names a
// version that is not one of the 2025 sessions'.
func modernHeader(hdr http.Header) bool {
	v := hdr.Get(headerProtocol)
	return v != "" && !gateway.SupportsProtocolVersion(v)
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
var nameHeaderMethods = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

var metaKeys = []string{gateway.MetaProtocolVersion, gateway.MetaClientCapabilities, gateway.MetaLogLevel}

// checkModern checks a stateless request's _meta and its headers against
// each other, as 2026-07-28 demands, and returns what _meta declares. hdr
// and msg are the client's: untrusted.
func checkModern(hdr http.Header, msg *jsonrpc.Message) (gateway.RequestMeta, *refusal) {
	var meta gateway.RequestMeta
	metaRaw, _, err := jsonrpc.FindPath(msg.Params, "_meta")
	if err != nil {
		return meta, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params._meta: %v", err)
	}
	var values [3]json.RawMessage
	if err := jsonrpc.FindEach(metaRaw, metaKeys, values[:]); err != nil {
		return meta, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "params._meta: %v", err)
	}
	version, ok := jsonrpc.StringValue(values[0])
	if !ok {
		return meta, refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams,
			"params._meta[%q] must be the protocol version, a string: every request of MCP %s carries it (or send initialize to start a 2025 session)",
			gateway.MetaProtocolVersion, gateway.ModernProtocolVersion)
	}
	switch hv := hdr.Values(headerProtocol); {
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
	meta.Protocol, meta.Capabilities = version, values[1]
	switch hv := hdr.Values(headerMethod); {
	case len(hv) != 1:
		return meta, refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: send exactly one %s header, equal to the request's method", headerMethod)
	case hv[0] != msg.Method:
		return meta, refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: %s header %q does not match the method %q", headerMethod, hv[0], msg.Method)
	}
	if member, ok := nameHeaderMethods[msg.Method]; ok {
		if r := checkName(hdr.Values(headerName), msg.Params, member); r != nil {
			return meta, r
		}
	}
	return meta, nil
}

// checkName checks the Mcp-Name header against params' member (the name
// of a tool or prompt, the uri of a resource).
func checkName(hv []string, params []byte, member string) *refusal {
	if len(hv) != 1 {
		return refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: send exactly one %s header, equal to params.%s", headerName, member)
	}
	name, ok := decodeHeaderValue(hv[0])
	if !ok {
		return refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: %s header is malformed: use visible ASCII, or =?base64?...?= for anything else", headerName)
	}
	raw, _, _ := jsonrpc.LookupPath(params, member)
	body, isString := jsonrpc.StringValue(raw)
	if !isString || body != name {
		return refuse(http.StatusBadRequest, gateway.CodeHeaderMismatch, "header mismatch: %s header does not match params.%s", headerName, member)
	}
	return nil
}

// decodeHeaderValue returns the value an Mcp-Name (or Mcp-Param-*) header
// carries: as is if plain, or decoded from its =?base64?...?= form. It
// reports false for characters a header value must not have, or a
// malformed encoding.
func decodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil || !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", false
		}
	}
	return v, true
}

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
func (h *Handler) stateless(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, sse bool, held *bool) {
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
	meta, refused := checkModern(r.Header, msg)
	if refused != nil {
		h.log.Debug("refused a stateless request: "+refused.err.Message, "client", clientOf(r).Name, "method", msg.Method)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(refused.status)
		w.Write(jsonrpc.AppendError(nil, msg.ID, refused.err))
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
	sess := h.g.StatelessRequest(meta, clientOf(r))
	defer sess.End()
	st := sess.NewStream(1, sse)
	sess.HandleRequest(msg, st)
	h.answer(w, r, sess, st, false)
}

// sessionless answers a GET or DELETE of a 2026-07-28 client, which has no
// session to stream or end: 405, as that revision says.
func (h *Handler) sessionless(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	h.httpError(w, http.StatusMethodNotAllowed, "MCP %s has no %s: POST subscriptions/listen for notifications", gateway.ModernProtocolVersion, r.Method)
}
