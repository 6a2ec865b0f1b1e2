#!/bin/sh
# otelcol.sh builds, or reuses from cache, the OpenTelemetry Collector the
# telemetry tests export to (internal/testing/otelcol: the collector's own
# packages from the Go module proxy, with the OTLP receiver and the file
# exporter), and prints its path: the only line on stdout.
#
# A binary is kept per stamp, the hash of the module's go.mod, go.sum and
# main.go and of the Go version, so warm runs cost nothing and a change of
# any of them builds anew. The build holds an exclusive lock on
# $cache/otelcol.lock: a second caller (`make telemetry` while `make
# check`'s background job builds it) waits for it and reuses its binary.
#
# Environment: MCPGATE_TEST_CACHE (default /var/cache/mcpgate-test), GO
# (default go).
set -eu

cache=${MCPGATE_TEST_CACHE:-/var/cache/mcpgate-test}/otelcol
src=$(cd "$(dirname "$0")/../../internal/testing/otelcol" && pwd)
go=${GO:-go}
mkdir -p "$cache"

stamp=$({ cat "$src/go.mod" "$src/go.sum" "$src/main.go"; "$go" version; } | sha256sum | cut -c1-16)
bin=$cache/otelcol-$stamp
exec 9>"$cache/../otelcol.lock"
flock 9
if [ ! -x "$bin" ]; then
	echo "otelcol: building the OpenTelemetry Collector into $bin" >&2
	began=$(date +%s)
	(cd "$src" && "$go" build -trimpath -o "$bin.tmp" .)
	mv "$bin.tmp" "$bin"
	echo "otelcol: built in $(($(date +%s) - began))s" >&2
	for old in "$cache"/otelcol-*; do
		[ "$old" = "$bin" ] || rm -f "$old"
	done
fi
echo "$bin"
