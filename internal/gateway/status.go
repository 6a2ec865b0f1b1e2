package gateway

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// The gateway's own resources, served with [gateway] status_resources.
const (
	HealthURI          = "mcpgate://health"
	BackendURIPrefix   = "mcpgate://backend/"
	backendURITemplate = BackendURIPrefix + "{name}"
)

// statusSource lists the status resources ahead of every backend's, so
// that no backend can shadow them. Its owner, "", names no backend.
func (g *Gateway) statusSource() catalog.Source {
	lists := &backend.Lists{}
	add := func(uri, name, desc string) {
		raw, _ := json.Marshal(map[string]string{"uri": uri, "name": name, "description": desc, "mimeType": "application/json"})
		lists.Resources = append(lists.Resources, raw)
	}
	add(HealthURI, "health", "Every backend's state, circuit, restarts and last error.")
	for _, b := range g.registry.Backends() {
		add(BackendURIPrefix+b.Name(), "backend "+b.Name(), "The state, circuit, restarts, calls and last error of backend "+b.Name()+".")
	}
	raw, _ := json.Marshal(map[string]string{"uriTemplate": backendURITemplate, "name": "backend", "description": "One backend's status.", "mimeType": "application/json"})
	lists.Templates = append(lists.Templates, raw)
	return catalog.Source{Lists: lists}
}

// backendHealth is one backend in the status resources. It carries no
// stderr lines, nothing a client sent and nothing a server wrote: its
// lastError is the short cause (backend.Cause).
type backendHealth struct {
	Name                string    `json:"name"`
	State               string    `json:"state"`
	Circuit             string    `json:"circuit"` // "open" or "closed"
	CircuitOpenSince    time.Time `json:"circuitOpenSince,omitzero"`
	RetryAt             time.Time `json:"retryAt,omitzero"`
	ConsecutiveFailures int       `json:"consecutiveFailures"`
	LastCheck           time.Time `json:"lastCheck,omitzero"`
	LastCheckLatencyMs  float64   `json:"lastCheckLatencyMs"`
	Restarts            int       `json:"restarts"`
	LastError           string    `json:"lastError"`
	CallsInFlight       int       `json:"callsInFlight"`
	CallsQueued         int       `json:"callsQueued"`
	Calls               uint64    `json:"calls"`
	FailedCalls         uint64    `json:"failedCalls"`
	Fallbacks           uint64    `json:"fallbacks"`
	// PendingChanges counts its tools, prompts and templates that differ
	// from the approved baseline (integrity).
	PendingChanges int `json:"pendingChanges"`
	// ServedByFallback are the tools of a stopped or failed backend that
	// stay listed because a fallback serves them.
	ServedByFallback []string `json:"servedByFallback,omitempty"`
}

func (g *Gateway) healthOf(b *backend.Backend) backendHealth {
	st, h := b.Status(), b.Health()
	circuit := "closed"
	if !h.CircuitOpen.IsZero() {
		circuit = "open"
	}
	return backendHealth{
		Name: b.Name(), State: st.State.String(), Circuit: circuit,
		CircuitOpenSince: h.CircuitOpen, RetryAt: h.RetryAt,
		ConsecutiveFailures: h.ConsecutiveFailures, LastCheck: h.LastCheck,
		LastCheckLatencyMs: float64(h.LastCheckLatency.Microseconds()) / 1000,
		Restarts:           st.Restarts, LastError: st.Cause, // never the detail, which can quote the server
		CallsInFlight: h.CallsInFlight, CallsQueued: h.CallsQueued,
		Calls: h.NCalls, FailedCalls: h.NFailedCalls, Fallbacks: h.NFallbacks,
		ServedByFallback: g.standInsOf(b.Name()),
	}
}

// standInsOf returns the tools of backend name listed for its fallbacks.
func (g *Gateway) standInsOf(name string) []string {
	if m := g.standIns.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// readStatus answers resources/read of a status resource. It reports false
// for a uri that is not one, or when status resources are off.
func (g *Gateway) readStatus(msg *jsonrpc.Message, stream *Stream, uri string) bool {
	if !g.opts.StatusResources || !strings.HasPrefix(uri, "mcpgate://") {
		return false
	}
	var v any
	switch name, isBackend := strings.CutPrefix(uri, BackendURIPrefix); {
	case uri == HealthURI:
		all := []backendHealth{}
		for _, b := range g.registry.Backends() {
			h := g.healthOf(b)
			h.PendingChanges = g.numPending(b.Name())
			all = append(all, h)
		}
		v = map[string]any{"backends": all}
	case isBackend && g.registry.Backend(name) != nil:
		h := g.healthOf(g.registry.Backend(name))
		h.PendingChanges = g.numPending(name)
		v = h
	default:
		return false
	}
	text, _ := json.Marshal(v)
	content, _ := json.Marshal(map[string]any{"contents": []map[string]string{{"uri": uri, "mimeType": "application/json", "text": string(text)}}})
	stream.push(jsonrpc.AppendResult(nil, msg.ID, content), true)
	return true
}
