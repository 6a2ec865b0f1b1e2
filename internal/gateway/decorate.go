package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// modernResult adds to the results a stateless (2026-07-28) client gets
// what that revision requires and a backend of an older one leaves out:
// resultType, the gateway's serverInfo in _meta, and the caching hints of
// lists and resources/read. Members are spliced into the raw bytes; the
// backend's result is never decoded and encoded again.
type modernResult struct {
	serverInfo []byte // `"io.modelcontextprotocol/serverInfo":{...}`
}

// CacheTTLMillis is the ttlMs of the results the gateway marks cacheable:
// 0, immediately stale, since a backend's restart or a reload of the
// access policy can change any list at any time; subscriptions/listen
// tells a client when to fetch again.
const CacheTTLMillis = 0

func (m *modernResult) init(version string) {
	m.serverInfo = jsonrpc.AppendString(nil, MetaServerInfo)
	m.serverInfo = append(m.serverInfo, `:{"name":"mcpgate","title":"mcpgate","version":`...)
	m.serverInfo = jsonrpc.AppendString(m.serverInfo, version)
	m.serverInfo = append(m.serverInfo, '}')
}

// cacheable reports whether results of method carry ttlMs and cacheScope.
func cacheable(method string) bool {
	switch method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover":
		return true
	}
	return false
}

var decoratedKeys = []string{"resultType", "_meta", "ttlMs", "cacheScope"}

// decorate returns the response data, for a request of method, as a
// 2026-07-28 client must get it, and the code of the error it carries (0
// for a result). Resource not found (-32002) becomes -32602, as the
// revision renumbered it. Members a result already has are kept: a
// gateway's lists differ per client policy, so what it adds is
// cacheScope "private".
func (m *modernResult) decorate(method string, data []byte) ([]byte, int) {
	result, span, ok := jsonrpc.Lookup(data, "result")
	if !ok {
		return modernError(data)
	}
	open := bytes.IndexByte(result, '{')
	if open < 0 || len(bytes.TrimSpace(result[:open])) > 0 {
		return data, 0 // not an object: nothing can be added
	}
	var have [4]json.RawMessage
	if jsonrpc.FindEach(result, decoratedKeys, have[:]) != nil {
		return data, 0
	}
	var buf [256]byte // on the stack: only out is allocated per result
	add := buf[:0]
	if have[0] == nil {
		add = append(add, `"resultType":"complete",`...)
	}
	if cacheable(method) {
		if have[2] == nil {
			add = append(add, `"ttlMs":`...)
			add = strconv.AppendInt(add, CacheTTLMillis, 10)
			add = append(add, ',')
		}
		if have[3] == nil {
			add = append(add, `"cacheScope":"private",`...)
		}
	}
	metaAt := -1 // where serverInfo goes into an existing _meta
	switch {
	case have[1] == nil:
		add = append(add, `"_meta":{`...)
		add = append(add, m.serverInfo...)
		add = append(add, "},"...)
	default:
		meta, mspan, _ := jsonrpc.Lookup(result, "_meta")
		if _, _, has := jsonrpc.Lookup(meta, MetaServerInfo); !has {
			if i := bytes.IndexByte(meta, '{'); i >= 0 && len(bytes.TrimSpace(meta[:i])) == 0 {
				metaAt = span.Start + mspan.Start + i + 1
			}
		}
	}
	at := span.Start + open + 1
	if len(add) == 0 && metaAt < 0 {
		return data, 0
	}
	if emptyObject(result[open+1:]) && len(add) > 0 {
		add = add[:len(add)-1] // no member follows
	}
	out := make([]byte, 0, len(data)+len(add)+len(m.serverInfo)+1)
	out = append(out, data[:at]...)
	out = append(out, add...)
	if metaAt < 0 {
		return append(out, data[at:]...), 0
	}
	out = append(out, data[at:metaAt]...)
	out = append(out, m.serverInfo...)
	if !emptyObject(data[metaAt:]) {
		out = append(out, ',')
	}
	return append(out, data[metaAt:]...), 0
}

// emptyObject reports whether rest, what follows an object's opening
// brace, closes it at once.
func emptyObject(rest []byte) bool {
	t := bytes.TrimLeft(rest, " \t\r\n")
	return len(t) > 0 && t[0] == '}'
}

// modernError returns an error response as a 2026-07-28 client must get
// it, and its code.
func modernError(data []byte) ([]byte, int) {
	raw, span, ok := jsonrpc.LookupPath(data, "error", "code")
	if !ok {
		return data, 0
	}
	code, err := strconv.Atoi(string(raw))
	if err != nil {
		return data, 0
	}
	if code == CodeResourceNotFound {
		return jsonrpc.Replace(data, span, []byte(strconv.Itoa(jsonrpc.CodeInvalidParams))), jsonrpc.CodeInvalidParams
	}
	return data, code
}
