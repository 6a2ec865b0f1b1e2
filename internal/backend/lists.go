package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// ServerInfo is what a child said about itself in its initialize result.
type ServerInfo struct {
	ProtocolVersion string
	Name, Version   string
	Instructions    string
	Capabilities    Capabilities
	// Dual marks a server whose server/discover listed both
	// ModernProtocolVersion and ProtocolVersion (see EraDual): over HTTP
	// it is initialized with ProtocolVersion, over stdio it speaks
	// ModernProtocolVersion only.
	Dual bool
}

// Capabilities are the server capabilities the gateway acts on. A nil member
// means the child did not declare the capability.
type Capabilities struct {
	Tools       *ListCapability     `json:"tools"`
	Prompts     *ListCapability     `json:"prompts"`
	Resources   *ResourceCapability `json:"resources"`
	Logging     json.RawMessage     `json:"logging"`
	Completions json.RawMessage     `json:"completions"`
	// Tasks is the 2025-11-25 tasks capability (experimental), and
	// Extensions the 2026-07-28 extensions, among them
	// io.modelcontextprotocol/tasks.
	Tasks      json.RawMessage `json:"tasks,omitempty"`
	Extensions json.RawMessage `json:"extensions,omitempty"`
}

// ListCapability is the shape of the tools and prompts capabilities.
type ListCapability struct {
	ListChanged bool `json:"listChanged"`
}

// ResourceCapability is the shape of the resources capability.
type ResourceCapability struct {
	Subscribe   bool `json:"subscribe"`
	ListChanged bool `json:"listChanged"`
}

// Lists holds a backend's tools, prompts, resources and resource templates,
// each element the raw object the child sent. A Lists value is never
// modified once published.
type Lists struct {
	Tools     []json.RawMessage
	Prompts   []json.RawMessage
	Resources []json.RawMessage
	Templates []json.RawMessage
}

// Which lists a refresh covers.
const (
	listTools uint32 = 1 << iota
	listPrompts
	listResources
	listTemplates
	listAll = listTools | listPrompts | listResources | listTemplates
)

// listDebounce is how long a refresh waits for more list_changed
// notifications: children tend to send them in bursts.
const listDebounce = 50 * time.Millisecond

// maxPages bounds how many pages of one list are read, against a child
// that keeps returning a cursor.
const maxPages = 1000

type initializeResult struct {
	ProtocolVersion string       `json:"protocolVersion"`
	Capabilities    Capabilities `json:"capabilities"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Instructions string `json:"instructions"`
}

// handshake learns the server's era and runs the handshake of that era.
// With probe, it sends server/discover first (see Conn.probe); a modern
// server needs no more (see modernHandshake), anything else gets
// initialize, notifications/initialized and the first fetch of every list
// it declared.
func (c *Conn) handshake(ctx context.Context, probe bool) (*Lists, error) {
	dual := false
	if probe {
		kind, err := c.probe(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case kind == EraModern:
			return c.modernHandshake(ctx)
		case kind == EraDual && c.remote == nil:
			// Over stdio the probe picked the connection's era: the one
			// process serves every client in 2026-07-28 (see EraDual).
			c.modern.Store(true)
			return c.modernHandshake(ctx)
		}
		dual = kind == EraDual
	}
	raw, err := c.Call(ctx, "initialize", c.b.initializeParams())
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var res initializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("initialize: malformed result: %w", err)
	}
	if res.ProtocolVersion == "" {
		return nil, errors.New("initialize: result has no protocolVersion")
	}
	c.server.Store(&ServerInfo{
		ProtocolVersion: res.ProtocolVersion,
		Name:            res.ServerInfo.Name,
		Version:         res.ServerInfo.Version,
		Instructions:    res.Instructions,
		Capabilities:    res.Capabilities,
		Dual:            dual,
	})
	c.dual.Store(dual)
	if err := c.Notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, err
	}
	// The full fetch below covers every list_changed received so far.
	c.lists.dirty.Store(0)
	lists, err := c.fetch(ctx, listAll, &Lists{})
	if err != nil {
		return nil, err
	}
	go c.lists.run()
	return lists, nil
}

// fetch reads the lists selected by which, reading every page, and returns
// them merged over old.
func (c *Conn) fetch(ctx context.Context, which uint32, old *Lists) (*Lists, error) {
	caps := c.Server().Capabilities
	next := *old
	var err error
	if which&listTools != 0 && caps.Tools != nil {
		if next.Tools, err = c.fetchList(ctx, "tools/list", "tools"); err != nil {
			return nil, err
		}
	}
	if which&listPrompts != 0 && caps.Prompts != nil {
		if next.Prompts, err = c.fetchList(ctx, "prompts/list", "prompts"); err != nil {
			return nil, err
		}
	}
	if which&listResources != 0 && caps.Resources != nil {
		if next.Resources, err = c.fetchList(ctx, "resources/list", "resources"); err != nil {
			return nil, err
		}
	}
	if which&listTemplates != 0 && caps.Resources != nil {
		next.Templates, err = c.fetchList(ctx, "resources/templates/list", "resourceTemplates")
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
			next.Templates, err = nil, nil // templates came after resources; older servers lack them
		}
		if err != nil {
			return nil, err
		}
	}
	return &next, nil
}

// fetchList reads one list to the end of its cursors.
func (c *Conn) fetchList(ctx context.Context, method, key string) ([]json.RawMessage, error) {
	var all []json.RawMessage
	var params json.RawMessage
	seen := map[string]bool{}
	for page := 0; page < maxPages; page++ {
		raw, err := c.Call(ctx, method, params)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("%s: malformed result: %w", method, err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(res[key], &items); res[key] != nil && err != nil {
			return nil, fmt.Errorf("%s: malformed %q: %w", method, key, err)
		}
		all = append(all, items...)
		var cursor string
		if res["nextCursor"] != nil {
			json.Unmarshal(res["nextCursor"], &cursor)
		}
		if cursor == "" {
			return all, nil
		}
		if seen[cursor] {
			return nil, fmt.Errorf("%s: the server returned cursor %q twice", method, cursor)
		}
		seen[cursor] = true
		params = append(jsonrpc.AppendString([]byte(`{"cursor":`), cursor), '}')
	}
	return nil, fmt.Errorf("%s: more than %d pages", method, maxPages)
}

// refresher re-reads lists after the child announced changes, coalescing
// bursts of list_changed notifications into one refresh.
type refresher struct {
	c     *Conn
	dirty atomic.Uint32
	wake  chan struct{}
}

func newRefresher(c *Conn) *refresher {
	return &refresher{c: c, wake: make(chan struct{}, 1)}
}

// notify records a list_changed notification. It reports whether method was
// one; those are handled here and not passed on.
func (r *refresher) notify(method string) bool {
	var bit uint32
	switch method {
	case "notifications/tools/list_changed":
		bit = listTools
	case "notifications/prompts/list_changed":
		bit = listPrompts
	case "notifications/resources/list_changed":
		bit = listResources | listTemplates
	default:
		return false
	}
	r.dirty.Or(bit)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// run refreshes until the child is gone. The handshake starts it.
func (r *refresher) run() {
	c := r.c
	for {
		select {
		case <-r.wake:
		case <-c.done:
			return
		}
		timer := time.NewTimer(listDebounce)
		select {
		case <-timer.C:
		case <-c.done:
			timer.Stop()
			return
		}
		which := r.dirty.Swap(0)
		if which == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.b.cfg.Timeout)
		lists, err := c.fetch(ctx, which, c.b.Lists())
		cancel()
		if err != nil {
			c.log.Warn(fmt.Sprintf("backend %q: could not refresh lists after list_changed: %v; keeping the old ones", c.b.name, err), "err", err)
			continue
		}
		c.b.publishLists(c, lists)
	}
}
