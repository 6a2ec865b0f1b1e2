#!/bin/sh
# One MCP session against the gateway `make run` started: initialize, then
# list the tools and call demo__add, through mcpgatectl bridge (a stdio MCP
# client would talk to it the same way).
set -eu
url=${1:-http://127.0.0.1:7431/mcp}
ctl=$(dirname "$0")/../bin/mcpgatectl
printf '%s\n' \
	'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"try","version":"1"}}}' \
	'{"jsonrpc":"2.0","method":"notifications/initialized"}' \
	'{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
	'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo__add","arguments":{"a":2,"b":40}}}' |
	"$ctl" bridge --url "$url"
