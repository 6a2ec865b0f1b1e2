#!/bin/sh
# upgrade-from.sh builds, or reuses from cache, the packages of the commit
# the end-to-end upgrade test (TestUpgradeFromPrevious in internal/e2e)
# installs first, to upgrade them to the checkout's: "today's package" of
# issue 46, the last whose units are in /lib/systemd/system and whose
# backend template has PartOf=mcpgate.service.
#
# Usage: packaging/e2e/upgrade-from.sh [REV]
#
# REV defaults to that commit. The packages are built from `git archive REV`
# with `make deb`, as version.sh --rev REV names them, into
# $cache/upgrade-from/COMMIT/, once per machine; the only line on stdout is
# the path of the main package. Needs the repository's history (a shallow
# clone lacks REV: git fetch --unshallow).
#
# Environment: MCPGATE_E2E_CACHE (default $MCPGATE_TEST_CACHE, else
# /var/cache/mcpgate-test), MAKE (default make).
set -eu

default_rev=8fc506bfa570a69bbfe09facea014c2ca4bed7ca

log() { printf 'upgrade-from: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

top=$(git rev-parse --show-toplevel) || die "not in a git checkout"
rev=${1:-$default_rev}
commit=$(git -C "$top" rev-parse --verify --quiet "$rev^{commit}") ||
	die "$rev is no commit of this repository (a shallow clone lacks older ones: git fetch --unshallow)"
cache=${MCPGATE_E2E_CACHE:-${MCPGATE_TEST_CACHE:-/var/cache/mcpgate-test}}
dir=$cache/upgrade-from/$commit

found() {
	for deb in "$dir"/mcpgate_*.deb; do
		[ -f "$deb" ] && echo "$deb" && return 0
	done
	return 1
}
mkdir -p "$cache/upgrade-from"
exec 9>>"$cache/upgrade-from/lock"
flock 9
found && exit 0

version=$("$top/packaging/deb/version.sh" --rev "$commit")
log "building the packages of $commit ($version) into $dir"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mcpgate-upgrade-from.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/src"
git -C "$top" archive --format=tar "$commit" | tar -x -C "$scratch/src"
# The archive has no .git: the version, and the dates make deb takes from
# the last commit, come from here.
if ! (cd "$scratch/src" && SOURCE_DATE_EPOCH=$(git -C "$top" log -1 --format=%ct "$commit") \
	"${MAKE:-make}" --no-print-directory deb DIST="$scratch/dist" RELEASE="$scratch/release" \
	DEB_VERSION="$version" VERSION="$version") >"$scratch/make-deb.log" 2>&1; then
	tail -n 30 "$scratch/make-deb.log" >&2
	die "make deb of $commit failed"
fi
rm -rf "$dir.new"
mkdir "$dir.new"
mv "$scratch"/dist/*.deb "$dir.new/"
mv "$dir.new" "$dir"
found
