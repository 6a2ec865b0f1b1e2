#!/bin/sh
# Installs what `make check` needs on a fresh Debian bookworm machine, as
# root: system tools from Debian, MCP servers and Node 22 from the npm
# registry. Idempotent; everything from npm lands in $MCPGATE_TEST_CACHE.
set -eu

cache=${MCPGATE_TEST_CACHE:-/var/cache/mcpgate-test}
here=$(cd "$(dirname "$0")" && pwd)

need=""
for tool in systemd-nspawn:systemd-container debootstrap:debootstrap scdoc:scdoc \
            lintian:lintian dbus-daemon:dbus busctl:systemd setpriv:util-linux \
            pkg-config:pkg-config gcc:gcc dpkg-shlibdeps:dpkg-dev man:man-db \
            unshare:util-linux npm:npm git:git haproxy:haproxy ip:iproute2 \
            chromium:chromium; do
	command -v "${tool%%:*}" >/dev/null 2>&1 || need="$need ${tool#*:}"
done
if [ -n "$need" ]; then
	echo "deps: installing$need"
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need
fi

# MCP servers the tests run, pinned by packaging/npm/package-lock.json.
mkdir -p "$cache/npm"
if ! cmp -s "$here/../npm/package-lock.json" "$cache/npm/package-lock.json"; then
	echo "deps: installing npm MCP servers into $cache/npm"
	cp "$here/../npm/package.json" "$here/../npm/package-lock.json" "$cache/npm/"
	(cd "$cache/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
# Our scripts on those packages (the 2026-07-28 fixture server and the SDK
# client driver), beside the node_modules they import from.
for script in "$here"/../npm/*.mjs; do
	cmp -s "$script" "$cache/npm/${script##*/}" || cp "$script" "$cache/npm/"
done
echo "deps: ok"
