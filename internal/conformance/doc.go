// Package conformance runs the official MCP conformance suite against fixture servers (the Go SDK's for 2025-11-25, ours on the TypeScript SDK v2 for 2026-07-28) and SDK clients against mcpgate, directly and through it; it holds only tests.
package conformance
