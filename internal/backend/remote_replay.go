package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mcphttp"
)

// sessionState is what a remote session was told that a new session,
// started after the server forgot the old one (HTTP 404), must be told
// again: the resources subscribed to and the logging level. The gateway
// does not see the renewal, so it would not repeat them itself. It holds
// one entry per subscribed URI: bounded as the gateway's subscriptions.
type sessionState struct {
	mu    sync.Mutex
	subs  map[string]json.RawMessage // params of resources/subscribe, by uri
	level json.RawMessage            // params of the last logging/setLevel
}

// remember records a request the remote session was sent.
func (s *sessionState) remember(msg *jsonrpc.Message) {
	switch msg.Method {
	case "resources/subscribe", "resources/unsubscribe":
		uri, _, ok := jsonrpc.Lookup(msg.Params, "uri")
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if msg.Method == "resources/unsubscribe" {
			delete(s.subs, string(uri))
			return
		}
		if s.subs == nil {
			s.subs = map[string]json.RawMessage{}
		}
		s.subs[string(uri)] = msg.Params
	case "logging/setLevel":
		s.mu.Lock()
		s.level = msg.Params
		s.mu.Unlock()
	}
}

// replay tells the current session again what the old one was told. The
// answers are read and dropped: they belong to no call.
func (r *remote) replay() {
	s := &r.state
	s.mu.Lock()
	type request struct {
		method string
		params json.RawMessage
	}
	var todo []request
	if s.level != nil {
		todo = append(todo, request{"logging/setLevel", s.level})
	}
	for _, uri := range slices.Sorted(maps.Keys(s.subs)) {
		todo = append(todo, request{"resources/subscribe", s.subs[uri]})
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, r.c.b.cfg.Timeout)
	defer cancel()
	for i, req := range todo {
		id := json.RawMessage(strconv.Quote("mcpgate-replay-" + strconv.Itoa(i)))
		body := jsonrpc.AppendRequest(nil, id, req.method, req.params)
		// Do, not Exchange: this runs inside the renewal, which must not
		// start another one.
		resp, err := r.client.Do(ctx, http.MethodPost, body, r.client.Session(), "", nil)
		if err != nil {
			r.c.log.Warn(fmt.Sprintf("backend %q: could not repeat a %s request to the new session: %v", r.c.b.name, req.method, err), "method", req.method, "err", err)
			continue
		}
		mcphttp.ReadAnswer(resp, []json.RawMessage{id}, r.maxSize, "", func([]byte) {})
	}
}
