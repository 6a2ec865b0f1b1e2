package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// modernResult adds to the results a stateless (2026-07-28) client gets
// what that revision requires and a backend of an older one leaves out:
// resultType, the gateway's serverInfo in _meta, and the caching hints of
// lists and resources/read. Members are spliced into the raw bytes; the
// backend's result is never decoded and encoded again.
type modernResult struct {
	serverInfo []byte // `"io.modelcontextprotocol/serverInfo":{...}`
	// listTTL is the ttlMs of list results and server/discover, in ms:
	// the least list_ttl of the enabled backends (see Configure).
	listTTL atomic.Int64
}

// CacheTTLMillis is the ttlMs of the results the gateway marks cacheable
// by default, and always of resources/read: 0, immediately stale, since a
// backend's restart or a reload of the access policy can change any list
// at any time; subscriptions/listen tells a client when to fetch again.
// An operator who knows better says so with each backend's list_ttl.
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

// replaceServerInfo is additions' metaAt for a result whose _meta has a
// serverInfo already.
const replaceServerInfo = -2

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
	var buf [256]byte // on the stack: only out is allocated per result
	add, open, metaAt := m.additions(method, result, buf[:0])
	if metaAt == replaceServerInfo {
		// A backend's own serverInfo (a modern one's) gives way to the
		// gateway's: the client's server is mcpgate.
		trimmed := withoutModern(result, nil)
		data = jsonrpc.Replace(data, span, trimmed)
		result = data[span.Start : span.Start+len(trimmed)]
		add, open, metaAt = m.additions(method, result, buf[:0])
	}
	if open < 0 || len(add) == 0 && metaAt < 0 {
		return data, 0
	}
	at := span.Start + open + 1
	out := make([]byte, 0, len(data)+len(add)+len(m.serverInfo)+1)
	out = append(out, data[:at]...)
	out = append(out, add...)
	if metaAt < 0 {
		return append(out, data[at:]...), 0
	}
	metaAt += span.Start
	out = append(out, data[at:metaAt]...)
	out = append(out, m.serverInfo...)
	if !emptyObject(data[metaAt:]) {
		out = append(out, ',')
	}
	return append(out, data[metaAt:]...), 0
}

// additions returns, appended to buf, what decorate adds to result right
// after its opening brace, at result[open] (open is -1 when result is not
// an object, or nothing can be read of it), and metaAt, where in result
// serverInfo goes into a _meta the result has already (-1 for none;
// replaceServerInfo when that _meta has a serverInfo, a backend's, which
// must go first). It reads result's members in one pass.
func (m *modernResult) additions(method string, result, buf []byte) (add []byte, open, metaAt int) {
	open = bytes.IndexByte(result, '{')
	if open < 0 || len(bytes.TrimSpace(result[:open])) > 0 {
		return nil, -1, -1 // not an object: nothing can be added
	}
	var have [4]json.RawMessage
	var spans [4]jsonrpc.Span
	if jsonrpc.FindEachSpan(result, decoratedKeys, have[:], spans[:]) != nil {
		return nil, -1, -1
	}
	add = buf
	if have[0] == nil {
		add = append(add, `"resultType":"complete",`...)
	}
	if cacheable(method) {
		if have[2] == nil {
			ttl := int64(CacheTTLMillis)
			if method != "resources/read" {
				ttl = m.listTTL.Load()
			}
			add = append(add, `"ttlMs":`...)
			add = strconv.AppendInt(add, ttl, 10)
			add = append(add, ',')
		}
		if have[3] == nil {
			add = append(add, `"cacheScope":"private",`...)
		}
	}
	metaAt = -1
	switch meta := have[1]; {
	case meta == nil:
		add = append(add, `"_meta":{`...)
		add = append(add, m.serverInfo...)
		add = append(add, "},"...)
	default:
		_, _, has := jsonrpc.Lookup(meta, MetaServerInfo)
		switch i := bytes.IndexByte(meta, '{'); {
		case has:
			metaAt = replaceServerInfo
		case i >= 0 && len(bytes.TrimSpace(meta[:i])) == 0:
			metaAt = spans[1].Start + i + 1
		}
	}
	if emptyObject(result[open+1:]) && len(add) > 0 {
		add = add[:len(add)-1] // no member follows
	}
	return add, open, metaAt
}

// spliceResult answers resp, a backend's response with result, under id
// as a 2026-07-28 client gets it, in resp's own buffer: the members
// decorate would add go in as the id is replaced, and a large result is
// not copied. It reports false, leaving resp alone, when that cannot be
// done in place (see jsonrpc.SpliceResultInsert), or serverInfo must go
// into a _meta the result has: then the stream decorates a copy.
func (m *modernResult) spliceResult(method string, resp *jsonrpc.Message, result, id json.RawMessage) ([]byte, bool) {
	var buf [256]byte
	add, open, metaAt := m.additions(method, result, buf[:0])
	if open < 0 || metaAt != -1 {
		return nil, false
	}
	return jsonrpc.SpliceResultInsert(resp, result, id, open+1, add)
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

// pushModern pushes resp, the backend's response with result, as the
// stream's answer under id, decorated for a 2026-07-28 client in resp's
// own buffer (see spliceResult). It reports false, pushing nothing and
// leaving resp alone, when the stream's answers are not decorated or
// that cannot be done in place.
func (s *Stream) pushModern(resp *jsonrpc.Message, result, id json.RawMessage) bool {
	s.mu.Lock()
	m, method, divert := s.modern, s.method, s.divert
	if m == nil {
		s.mu.Unlock()
		return false
	}
	out, ok := m.spliceResult(method, resp, result, id)
	if !ok {
		s.mu.Unlock()
		return false
	}
	if divert != nil {
		s.mu.Unlock()
		divert(out, true)
		return true
	}
	defer s.mu.Unlock()
	s.modern = nil // decorated already
	s.pushLocked(out, true)
	s.modern = m
	return true
}
