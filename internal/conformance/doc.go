// Package conformance runs the official MCP conformance suite against the Go SDK's fixture server, directly and through mcpgate; it holds only tests.
package conformance
