#!/bin/sh
# Installs the Node gateways `make bench` compares mcpgate with, pinned by
# bench/package-lock.json, into $MCPGATE_BENCH_CACHE/npm (default
# /var/cache/mcpgate-bench/npm). Idempotent: nothing is fetched when the
# installed lock file is the same.
set -eu

cache=${MCPGATE_BENCH_CACHE:-/var/cache/mcpgate-bench}
here=$(cd "$(dirname "$0")" && pwd)

command -v npm >/dev/null 2>&1 || { echo "bench: npm is missing; run packaging/ci/deps.sh (or apt-get install npm)" >&2; exit 1; }
mkdir -p "$cache/npm"
if ! cmp -s "$here/package-lock.json" "$cache/npm/package-lock.json" || [ ! -d "$cache/npm/node_modules" ]; then
	echo "bench: installing supergateway and mcp-proxy into $cache/npm"
	cp "$here/package.json" "$here/package-lock.json" "$cache/npm/"
	(cd "$cache/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
