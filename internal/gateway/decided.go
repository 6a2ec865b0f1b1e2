package gateway

import (
	"encoding/json"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Members of params that routing, the policy or the audit read, by method.
// The gateway decides on them and forwards params as the client sent them,
// so each must be one member, spelled exactly: a repeated member is read
// as the first by some parsers and as the last by most, and Go's
// encoding/json also reads one spelled in another case. Such a message is
// refused rather than forwarded (checkDecided); jsonrpc.Lookup itself
// never returns an ambiguous member, so a lookup this table misses sees
// none.
var (
	decidedInRequests = [][]string{{"_meta", "progressToken"}}
	decidedByMethod   = map[string][][]string{
		"tools/call":               {{"name"}, {"arguments"}},
		"prompts/get":              {{"name"}, {"arguments"}},
		"resources/read":           {{"uri"}},
		"resources/subscribe":      {{"uri"}},
		"resources/unsubscribe":    {{"uri"}},
		"completion/complete":      {{"ref", "type"}, {"ref", "name"}, {"ref", "uri"}},
		"logging/setLevel":         {{"level"}},
		"tools/list":               {{"cursor"}},
		"prompts/list":             {{"cursor"}},
		"resources/list":           {{"cursor"}},
		"resources/templates/list": {{"cursor"}},
		"notifications/cancelled":  {{"requestId"}, {"reason"}},
	}
)

// checkDecided returns an invalid-request error when a member of params
// the gateway decides on is ambiguous, or nil.
func checkDecided(method string, params json.RawMessage, request bool) error {
	if len(params) == 0 || params[0] != '{' {
		return nil
	}
	check := func(paths [][]string) error {
		for _, path := range paths {
			if _, _, err := jsonrpc.FindPath(params, path...); err != nil {
				return jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "invalid request: %v (reading params.%s); mcpgate decides on this member, so it must appear once, spelled exactly",
					err, strings.Join(path, "."))
			}
		}
		return nil
	}
	if request {
		if err := check(decidedInRequests); err != nil {
			return err
		}
	}
	return check(decidedByMethod[method])
}
