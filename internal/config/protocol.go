package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Protocol are the backend keys about MCP itself: which era a server of
// both is driven in, what mcpgate declares to it as a client, how long
// its lists may be cached by clients, and how long a stateless client's
// call that asked for input waits for the client's retry.
type Protocol struct {
	Era                string             // "auto" (default) | "legacy"
	ClientCapabilities ClientCapabilities // unset (default): all three
	// ListTTL is the ttlMs of the list results 2026-07-28 clients get
	// (the least over the backends); 0 (default) means immediately
	// stale. The gateway applies it, so Equal ignores it.
	ListTTL time.Duration
	// InputRetryTimeout bounds how long a call that asked a stateless
	// client for input waits for its retry; 0 means the backend's
	// client_request_timeout.
	InputRetryTimeout time.Duration
}

// Values of Protocol.Era.
const (
	EraAuto   = "auto"
	EraLegacy = "legacy"
)

// ClientCapabilities are the client capabilities mcpgate may declare to a
// backend, in initialize or in every 2026-07-28 request's _meta, as
// client_capabilities lists them; without Set (the zero value, the key
// not given), all three. What it declares is what it can relay (see
// Declared).
type ClientCapabilities struct {
	Set                          bool
	Sampling, Elicitation, Roots bool
}

// clientCapabilityNames are the values of client_capabilities.
var clientCapabilityNames = []string{"sampling", "elicitation", "roots"}

// defaultProtocol is the one place that knows the defaults of Protocol.
func defaultProtocol() Protocol {
	return Protocol{Era: EraAuto}
}

// InputRetry is how long a call that asked a stateless client for input
// waits for the client's retry: input_retry_timeout, else
// client_request_timeout.
func (b *Backend) InputRetry() time.Duration {
	if b.InputRetryTimeout > 0 {
		return b.InputRetryTimeout
	}
	return b.ClientRequestTimeout
}

// Declared returns the client capabilities mcpgate declares to the
// backend: those of client_capabilities that it can answer, sampling and
// elicitation only while it relays the backend's requests to clients,
// roots also when roots answers them from the configuration.
func (b *Backend) Declared() ClientCapabilities {
	c := b.ClientCapabilities
	if !c.Set {
		c = ClientCapabilities{Sampling: true, Elicitation: true, Roots: true}
	}
	return ClientCapabilities{
		Sampling:    c.Sampling && b.RelayClientRequests,
		Elicitation: c.Elicitation && b.RelayClientRequests,
		Roots:       c.Roots && (b.RelayClientRequests || len(b.Roots) > 0),
	}
}

func protocolFields() []field[Backend] {
	return []field[Backend]{
		{"era", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.str(at, v, &b.Era, oneOf(EraAuto, EraLegacy))
		}},
		{"client_capabilities", func(d *decoder, at keyPath, v any, b *Backend) bool {
			var names []string
			if !d.strList(at, v, &names, oneOf(clientCapabilityNames...)) {
				return false
			}
			b.ClientCapabilities = ClientCapabilities{
				Set:         true,
				Sampling:    slices.Contains(names, "sampling"),
				Elicitation: slices.Contains(names, "elicitation"),
				Roots:       slices.Contains(names, "roots"),
			}
			return true
		}},
		{"list_ttl", func(d *decoder, at keyPath, v any, b *Backend) bool {
			if v == "0s" || v == "off" {
				b.ListTTL = 0
				return true
			}
			return d.duration(at, v, &b.ListTTL)
		}},
		{"input_retry_timeout", func(d *decoder, at keyPath, v any, b *Backend) bool {
			return d.duration(at, v, &b.InputRetryTimeout)
		}},
	}
}

// checkProtocol reports protocol keys that cannot apply to the backend.
func (d *decoder) checkProtocol(at keyPath, t map[string]any, b *Backend) {
	if b.Transport == "cli" {
		for _, k := range []string{"era", "client_capabilities", "list_ttl", "input_retry_timeout"} {
			if _, set := t[k]; set {
				d.fail(at.child(k), `%s is for an MCP server; a cli backend (transport = "cli") runs programs; remove it`, k)
			}
		}
		return
	}
	if c := b.ClientCapabilities; c.Set && !b.RelayClientRequests {
		var relayed []string
		if c.Sampling {
			relayed = append(relayed, "sampling")
		}
		if c.Elicitation {
			relayed = append(relayed, "elicitation")
		}
		if c.Roots && len(b.Roots) == 0 {
			relayed = append(relayed, "roots")
		}
		if len(relayed) > 0 {
			d.fail(at.child("client_capabilities"), "%s cannot be declared with relay_client_requests = false, which relays no request of the backend to a client; remove %s, or relay_client_requests",
				strings.Join(relayed, " and "), strings.Join(relayed, " and "))
		}
	}
	if b.ListTTL > 0 && b.ListTTL < time.Millisecond {
		d.fail(at.child("list_ttl"), "%s is below a millisecond, the unit of ttlMs; use at least \"1ms\", or \"0s\"", b.ListTTL)
	}
}

// String is how client_capabilities is written: the names listed, or
// "default" when the key was not given.
func (c ClientCapabilities) String() string {
	if !c.Set {
		return "default"
	}
	var names []string
	for i, on := range []bool{c.Sampling, c.Elicitation, c.Roots} {
		if on {
			names = append(names, clientCapabilityNames[i])
		}
	}
	return fmt.Sprintf("[%s]", strings.Join(names, " "))
}
