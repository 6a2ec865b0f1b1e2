#!/bin/sh
# Prints the Debian package version of the git checkout in the current
# directory, derived from `git describe`, such that later commits always
# sort higher under dpkg's ordering:
#
#   v1.2.3                    -> 1.2.3
#   v1.2.3-5-gabc1234         -> 1.2.3+5.gabc1234     (5 commits after v1.2.3)
#   v1.2.3-rc1                -> 1.2.3~rc1            (before 1.2.3)
#   v1.2.3-rc1-5-gabc1234     -> 1.2.3~rc1+5.gabc1234
#   any of them, uncommitted changes: + ".dirty" (or "+dirty" after a bare tag)
#   commits but no v* tag     -> 0.0.0+git20251122044512.abc1234 (commit
#                                time UTC, so later commits sort higher)
#   no commit at all          -> 0.0.0~dev
#
# The version has no "-": mcpgate is a native package with no Debian
# revision.
#
# Usage: version.sh                   for the checkout
#        version.sh --rev REV         for the commit REV (never dirty), such
#                                     as the one the upgrade test starts from
#        version.sh --describe DESC   map one `git describe --long` string
#                                     (for tests)
set -eu

# from_describe maps "TAG-N-gHASH[-dirty]" (git describe --long) to a
# version.
from_describe() {
	d=$1 dirty=
	case $d in *-dirty) dirty=1 d=${d%-dirty} ;; esac
	hash=${d##*-g}
	d=${d%-g*}
	n=${d##*-}
	tag=${d%-*}
	# v1.2.3-rc1 -> 1.2.3~rc1: a pre-release sorts before its release.
	v=$(printf '%s' "${tag#v}" | sed 's/-/~/g')
	sep=+
	case $v in *+*) sep=. ;; esac
	if [ "$n" != 0 ]; then
		v="$v$sep$n.g$hash"
		sep=.
	fi
	if [ -n "$dirty" ]; then
		v="${v}${sep}dirty"
	fi
	printf '%s\n' "$v"
}

check() {
	if ! printf '%s\n' "$1" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
		echo "version.sh: $1 is not a valid Debian version; tag releases as v1.2.3 or v1.2.3-rc1" >&2
		exit 1
	fi
	printf '%s\n' "$1"
}

if [ $# -eq 2 ] && [ "$1" = --describe ]; then
	check "$(from_describe "$2")"
	exit 0
fi
rev=HEAD
dirty=--dirty
if [ $# -eq 2 ] && [ "$1" = --rev ]; then
	if ! rev=$(git rev-parse --verify --quiet "$2^{commit}"); then
		echo "version.sh: $2 is no commit of this repository (a shallow clone lacks older ones: git fetch --unshallow)" >&2
		exit 1
	fi
	dirty=
elif [ $# -ne 0 ]; then
	echo "usage: version.sh [--rev REV | --describe GIT-DESCRIBE-LONG]" >&2
	exit 2
fi

if ! git rev-parse --verify --quiet "$rev" >/dev/null 2>&1; then
	check 0.0.0~dev
	exit 0
fi
if [ -n "$dirty" ]; then
	desc=$(git describe --tags --long --dirty --match 'v[0-9]*' 2>/dev/null) || desc=
else
	desc=$(git describe --tags --long --match 'v[0-9]*' "$rev" 2>/dev/null) || desc=
fi
if [ -n "$desc" ]; then
	check "$(from_describe "$desc")"
	exit 0
fi
v=0.0.0+git$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S "$rev").$(git rev-parse --short=7 "$rev")
if [ -n "$dirty" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	v=$v.dirty
fi
check "$v"
