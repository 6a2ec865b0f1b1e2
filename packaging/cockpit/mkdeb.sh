#!/bin/sh
# Builds $DIST/mcpgate-cockpit_<version>_all.deb, the Cockpit page of
# cockpit/ under /usr/share/cockpit/mcpgate/, with the copyright and
# changelog Debian policy wants. Run by `make deb` from the top of the
# checkout, before packaging/deb/mkdeb.sh (whose last line of output is
# the main package, as callers expect).
#
# Environment: DIST (default dist), DEB_VERSION (default from
# packaging/deb/version.sh).
set -eu

here=packaging/cockpit
dist=${DIST:-dist}
version=${DEB_VERSION:-$(packaging/deb/version.sh)}
deb=$dist/mcpgate-cockpit_${version}_all.deb

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
	export SOURCE_DATE_EPOCH
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/mcpgate-cockpit-deb.XXXXXX")
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"

page=$root/usr/share/cockpit/mcpgate
install -d "$page"
install -m 0644 cockpit/manifest.json cockpit/index.html cockpit/mcpgate.js cockpit/mcpgate.css "$page/"

doc=$root/usr/share/doc/mcpgate-cockpit
install -d "$doc"
install -m 0644 "$here/copyright" "$doc/copyright"
maintainer=$(sed -n 's/^Maintainer: //p' packaging/deb/control.in)
{
	printf 'mcpgate (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Built from git %s.\n' "$(git describe --tags --always --dirty 2>/dev/null || echo 'checkout without commits')"
	printf '  * The history is in the git repository: https://github.com/mcpgate/mcpgate\n\n'
	printf ' -- %s  %s\n' "$maintainer" "$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

ctl=$root/DEBIAN
install -d "$ctl"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort | xargs md5sum) > "$ctl/md5sums"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@INSTALLED_SIZE@|$size|" -e "s|@MAINTAINER@|$maintainer|" \
	"$here/control.in" > "$ctl/control"
chmod 0644 "$ctl/control" "$ctl/md5sums"

mkdir -p "$dist"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
