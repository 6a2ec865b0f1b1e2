#!/bin/sh
# Builds $DIST/mcpgate_<version>_<arch>.deb: `make install` into a staging
# tree, the files Debian policy wants beside it (compressed manual pages,
# copyright, changelog.gz), the control files, then
# dpkg-deb --root-owner-group --build. Run by `make deb` from the top of
# the checkout.
#
# Environment: MAKE (default make), DIST (default dist), DEB_VERSION
# (default from packaging/deb/version.sh), DEB_ROOT (staging directory,
# kept afterwards; default a temporary one that is removed).
set -eu

here=packaging/deb
make=${MAKE:-make}
dist=${DIST:-dist}
version=${DEB_VERSION:-$("$here/version.sh")}
arch=$(dpkg --print-architecture)
deb=$dist/mcpgate_${version}_$arch.deb

# Timestamps come from the last commit, so that rebuilding a commit gives
# the same changelog date (dpkg-deb clamps file times to it as well).
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
	export SOURCE_DATE_EPOCH
fi

# Scratch directories, removed however the script ends.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mcpgate-deb.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if [ -n "${DEB_ROOT:-}" ]; then
	root=$DEB_ROOT
	rm -rf "$root"
	mkdir -p "$root"
else
	root=$scratch/root
	mkdir "$root"
fi
root=$(cd "$root" && pwd)
chmod 0755 "$root"

# The package's files. PREFIX and the binaries' version are the package's,
# whatever the caller set. The units go to /usr/lib/systemd/system whatever
# systemd.pc of the build host says (bookworm's says /lib/systemd/system):
# trixie finished the merged-/usr transition and its lintian rejects files
# under the aliased /lib (aliased-location), and bookworm's systemd reads
# /usr/lib/systemd/system as well. The same package installs on both.
"$make" --no-print-directory install DESTDIR="$root" PREFIX=/usr sysconfdir=/etc VERSION="$version" \
	SYSTEMDUNITDIR=/usr/lib/systemd/system SYSUSERSDIR=/usr/lib/sysusers.d TMPFILESDIR=/usr/lib/tmpfiles.d

# Manual pages and the changelog are compressed with gzip -9n (no name, no
# time stamp), as Debian policy 12.3 and lintian ask.
find "$root/usr/share/man" -type f -name '*.[0-9]' -exec gzip -9n {} +

doc=$root/usr/share/doc/mcpgate
install -d "$doc"
install -m 0644 "$here/copyright" "$doc/copyright"
# Adapter files for cli backends (mcpgate.toml(5), adapter_file).
install -d "$doc/examples/adapters"
install -m 0644 examples/adapters/*.toml "$doc/examples/adapters/"
install -m 0644 packaging/examples/haproxy.cfg packaging/examples/envoy.yaml packaging/examples/otel.conf "$doc/examples/"
maintainer=$(sed -n 's/^Maintainer: //p' "$here/control.in")
{
	printf 'mcpgate (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Built from git %s.\n' "$(git describe --tags --always --dirty 2>/dev/null || echo 'checkout without commits')"
	printf '  * The history is in the git repository: https://github.com/mcpgate/mcpgate\n\n'
	printf ' -- %s  %s\n' "$maintainer" "$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Control files.
ctl=$root/DEBIAN
install -d "$ctl"
for script in postinst prerm postrm; do
	install -m 0755 "$here/$script" "$ctl/$script"
done
(cd "$root" && find etc -type f | sort | sed 's|^|/|') > "$ctl/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort | xargs md5sum) > "$ctl/md5sums"
chmod 0644 "$ctl/conffiles" "$ctl/md5sums"

# Depends on the libc6 the binaries need: dpkg-shlibdeps reads the symbol
# versions they use. It insists on a debian/ directory; give it a scratch
# one with the staging tree as the package's build directory.
shlib=$scratch/shlibdeps
mkdir -p "$shlib/debian"
: > "$shlib/debian/control"
ln -s "$root" "$shlib/debian/mcpgate"
shlibs=$(cd "$shlib" && dpkg-shlibdeps -O debian/mcpgate/usr/bin/mcpgated debian/mcpgate/usr/bin/mcpgatectl)
shlibs=${shlibs#shlibs:Depends=}
if [ -z "$shlibs" ]; then
	echo "mkdeb: dpkg-shlibdeps found no shared library dependencies; are the binaries statically linked?" >&2
	exit 1
fi

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@INSTALLED_SIZE@|$size|" \
	-e "s|@SHLIBS_DEPENDS@|$shlibs|" "$here/control.in" > "$ctl/control"
chmod 0644 "$ctl/control"

mkdir -p "$dist"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
