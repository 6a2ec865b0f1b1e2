#!/bin/bash
# mkroot.sh builds, or reuses from cache, a Debian root that the end-to-end
# tests (internal/e2e, `make e2e`) boot with `systemd-nspawn -b`: Debian 12
# bookworm or Debian 13 trixie, the releases mcpgate is tested on.
#
# Usage: packaging/e2e/mkroot.sh [--suite=bookworm|trixie] [--force]
#
# --suite defaults to bookworm. Each suite's root is cached on its own,
# $cache/SUITE-root. Progress goes to stderr, one line per step (details in
# $cache/SUITE-build.log); the only line on stdout is the root directory. A
# root is rebuilt when this script changes (its hash and the suite are the
# stamp, and the script holds every package list), when --force is given,
# or when a previous build did not finish. A build happens in a scratch
# directory that replaces the old root only once complete, under an
# exclusive lock on $cache/SUITE-root.lock; the tests hold a shared lock on
# that file while they boot the root, so a rebuild never pulls the tree from
# under a running container, and building one suite's root never waits for
# tests on the other's. Safe to re-run at any time.
#
# Environment:
#   MCPGATE_E2E_CACHE   cache directory (default $MCPGATE_TEST_CACHE, else
#                       /var/cache/mcpgate-test)
#   MCPGATE_E2E_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#
# Needs root, debootstrap and systemd-nspawn (package systemd-container), and
# while building the network: the Debian mirror and registry.npmjs.org. The
# booted container needs no network.
set -euo pipefail

mirror=${MCPGATE_E2E_MIRROR:-http://deb.debian.org/debian}
security_mirror=${mirror%/debian}/debian-security
cache=${MCPGATE_E2E_CACHE:-${MCPGATE_TEST_CACHE:-/var/cache/mcpgate-test}}

# Installed with apt-get --no-install-recommends on top of minbase, in
# every suite. busctl, journalctl, systemd-run and systemd-analyze come with
# systemd. cockpit-ws and cockpit-bridge serve the mcpgate-cockpit page to
# the browser of TestCockpitPage; cockpit-system is the shell and its Logs
# page, which the page links to (no recommends: no sudo).
packages=(
	systemd systemd-sysv dbus polkitd
	nodejs npm
	ca-certificates iproute2 procps curl jq
	cockpit-ws cockpit-bridge cockpit-system
)
# What one suite needs beside them. trixie: polkitd depends on
# "default-logind | logind", virtual packages that only libpam-systemd
# provides there (debootstrap --include cannot resolve them, and naming it
# leaves apt nothing to choose); lintian is trixie's, for TestLintian
# (bookworm's is the host's, in TestDeb).
declare -A suite_packages=(
	[bookworm]=""
	[trixie]="libpam-systemd lintian"
)

# The real MCP server the e2e test runs as a backend, installed globally
# (/usr/local/lib/node_modules, /usr/local/bin/mcp-server-everything) so any
# user can start it without the network. Pinned: bump it deliberately (its
# dependencies are not pinned; a rebuild may pick newer ones).
npm_packages=(
	@modelcontextprotocol/server-everything@2026.8.31
)

# Units that would only add noise or network traffic to a test boot.
masked_units=(
	console-getty.service getty@.service serial-getty@.service
	apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer
	e2scrub_all.timer fstrim.timer man-db.timer
	systemd-networkd-wait-online.service
)

log() { printf 'mkroot: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

force=no
suite=bookworm
for arg; do
	case $arg in
	--force) force=yes ;;
	--suite=*) suite=${arg#--suite=} ;;
	-h | --help)
		sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	*) die "unknown argument \"$arg\" (try --help)" ;;
	esac
done

[[ -v suite_packages[$suite] ]] || die "unknown suite \"$suite\": the tests run on ${!suite_packages[*]}"
read -r -a extra <<<"${suite_packages[$suite]}"
packages+=("${extra[@]}")
root=$cache/$suite-root
stamp=$cache/$suite-root.stamp
build=$cache/$suite-root.build
buildlog=$cache/$suite-build.log
lockfile=$cache/$suite-root.lock

[[ $(id -u) == 0 ]] || die "must run as root (debootstrap and systemd-nspawn need it)"
for tool in debootstrap systemd-nspawn flock sha256sum findmnt; do
	command -v "$tool" >/dev/null ||
		die "$tool not found; install it (apt-get install debootstrap systemd-container)"
done

want=$({ cat "${BASH_SOURCE[0]}"; echo "suite=$suite"; } | sha256sum | cut -d' ' -f1)

up_to_date() { [[ $force == no && -d $root && -f $stamp && $(<"$stamp") == "$want" ]]; }

# The common case, a current root, takes only a shared lock, so it neither
# waits for nor blocks running tests. A rebuild needs the exclusive lock.
mkdir -p "$cache"
exec 9>>"$lockfile"
flock -s 9
if up_to_date; then
	log "root is up to date: $root (stamp ${want:0:12})"
	echo "$root"
	exit 0
fi
flock -u 9
if ! flock -x -n 9; then
	log "waiting for the exclusive lock on $lockfile (another build, or e2e tests using the root)"
	flock -x 9
fi
if up_to_date; then # someone else built it meanwhile
	log "root is up to date: $root (stamp ${want:0:12})"
	echo "$root"
	exit 0
fi

# rm_tree deletes a tree without ever crossing into a mount that a crashed
# run may have left inside it (a bind mount of / would take the host along).
rm_tree() {
	local dir=$1 mnt
	[[ -e $dir ]] || return 0
	while read -r mnt; do
		[[ -n $mnt ]] && umount -l "$mnt"
	done < <(findmnt -rn -o TARGET | awk -v d="$dir" '$0 == d || index($0, d "/") == 1' | sort -r)
	rm -rf --one-file-system "$dir"
}

# Where nspawn runs. On a host whose PID 1 is not systemd there is no system
# bus to ask for a scope, so nspawn needs --keep-unit; it then creates its
# payload/ and supervisor/ cgroups inside its own cgroup, here the root one,
# where concurrent runs would share them. So each nspawn call gets a cgroup
# of its own in every hierarchy, like the test harness's containers
# (internal/e2e/container.go), removed again at exit.
nspawn_unit=()
cgroups=()
if [[ ! -d /run/systemd/system ]]; then
	nspawn_unit=(--keep-unit)
	if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
		hierarchies=(/sys/fs/cgroup)
	else
		hierarchies=()
		for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
			if [[ $(stat -fc %T "$h" 2>/dev/null) == cgroup* ]]; then hierarchies+=("$h"); fi
		done
	fi
	for h in "${hierarchies[@]}"; do
		cgroups+=("$h/mcpgate-e2e/mkroot-$$")
	done
fi

# in_root runs a command inside the tree being built. systemd-nspawn, unlike
# chroot, sets up and tears down /proc, /dev, /sys and resolv.conf itself;
# --register=no because there may be no systemd-machined; --pipe gives the
# command our stdin/stdout, not a pseudo-terminal.
in_root() {
	local ca=() d
	# Let node/npm trust what the host trusts (a TLS-inspecting proxy's CA
	# is only in the host's bundle).
	if [[ -r /etc/ssl/certs/ca-certificates.crt ]]; then
		ca=(--bind-ro=/etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt
			--setenv=NODE_EXTRA_CA_CERTS=/run/host-ca.crt)
	fi
	# nspawn always complains that it cannot clean up its propagation
	# directory when /run is not a tmpfs (as here); that is harmless.
	(
		for d in "${cgroups[@]}"; do
			mkdir -p "$d"
			echo "$BASHPID" >"$d/cgroup.procs"
		done
		exec systemd-nspawn --quiet --pipe --register=no "${nspawn_unit[@]}" \
			--directory="$build" --resolv-conf=replace-host --timezone=off \
			--link-journal=no --setenv=DEBIAN_FRONTEND=noninteractive \
			--setenv=LC_ALL=C.UTF-8 --bind="$archives:/var/cache/apt/archives" \
			"${ca[@]}" -- "$@"
	) 2> >(grep -v --line-buffered '^Attempted to remove disk file system under' >&2)
}

# remove_cgroups removes in_root's cgroups, deepest first.
remove_cgroups() {
	local d
	for d in "${cgroups[@]}"; do
		if [[ -d $d ]]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
		rmdir "$(dirname "$d")" 2>/dev/null || true # busy while a test runs
	done
}

# step runs one build step with its output in $buildlog and, when it fails,
# shows the end of that log.
step() {
	local what=$1
	shift
	log "$what"
	echo "### $what: $*" >>"$buildlog"
	if ! "$@" >>"$buildlog" 2>&1; then
		tail -n 25 "$buildlog" | sed 's/^/  | /' >&2
		die "$what failed; full log: $buildlog"
	fi
}

start=$SECONDS
: >"$buildlog"
log "building the $suite root in $build (stamp ${want:0:12}, log $buildlog)"
rm_tree "$build"
on_exit() {
	remove_cgroups
	if [[ -e $build ]]; then
		log "the partial root is left in $build for inspection; the next run removes it"
	fi
}
trap on_exit EXIT
# The package caches are per suite: the same name and version may be built
# differently for each release.
debs=$cache/$suite-debootstrap-debs
archives=$cache/$suite-apt-archives
mkdir -p "$debs" "$archives/partial"

step "debootstrap --variant=minbase $suite $mirror" \
	debootstrap --variant=minbase --cache-dir="$debs" "$suite" "$build" "$mirror"

cat >"$build/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
# Keep services from starting while packages install.
printf '#!/bin/sh\nexit 101\n' >"$build/usr/sbin/policy-rc.d"
chmod 755 "$build/usr/sbin/policy-rc.d"

step "apt-get update" in_root apt-get -q update
step "apt-get install ${packages[*]}" \
	in_root apt-get -q -y --no-install-recommends install "${packages[@]}"
step "apt-get dist-upgrade" in_root apt-get -q -y --no-install-recommends dist-upgrade
step "npm install --global ${npm_packages[*]}" \
	in_root npm install --global --omit=dev --no-audit --no-fund --no-update-notifier "${npm_packages[@]}"
step "npm cache clean" in_root npm cache clean --force

# Prove the server runs on the root's node before caching the root.
node_version=$(in_root node --version)
log "checking that mcp-server-everything answers initialize on node $node_version"
reply=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mkroot","version":"0"}}}' |
	in_root timeout 60 sh -c 'mcp-server-everything stdio 2>/dev/null | grep -m 1 "\"id\":1"') || true
[[ $reply == *'"serverInfo"'* ]] || die "mcp-server-everything did not answer initialize: ${reply:-<nothing>}"

log "configuring the root for booting under systemd-nspawn"
rm -f "$build/usr/sbin/policy-rc.d"
echo mcpgate-e2e >"$build/etc/hostname"
# No identity in the cache: /etc/machine-id stays empty so the container's
# systemd makes a transient one from nspawn's --uuid=, and D-Bus reads that
# same one (Debian's dbus would otherwise keep the id made during the build).
: >"$build/etc/machine-id"
mkdir -p "$build/var/lib/dbus"
ln -sfn /etc/machine-id "$build/var/lib/dbus/machine-id"
for unit in "${masked_units[@]}"; do
	ln -sfn /dev/null "$build/etc/systemd/system/$unit"
done
# A persistent journal, so journalctl inside sees the whole boot.
mkdir -p "$build/var/log/journal"
# (No apt-get clean: the archives are $archives, kept for rebuilds.)
rm -rf "$build"/var/lib/apt/lists/* "$build"/var/cache/apt/*.bin "$build"/root/.npm \
	"$build"/tmp/* "$build"/var/tmp/*

{
	echo "suite=$suite"
	echo "built=$(date -u +%FT%TZ)"
	echo "stamp=$want"
	echo "packages=${packages[*]}"
	echo "npm=${npm_packages[*]}"
	in_root dpkg-query -W -f='${Package}=${Version}\n' systemd nodejs npm dbus polkitd cockpit-ws "${extra[@]}"
} >"$build/etc/mcpgate-e2e-root"

log "replacing $root"
rm_tree "$root.old"
if [[ -e $root ]]; then mv "$root" "$root.old"; fi
mv "$build" "$root"
rm_tree "$root.old"
echo "$want" >"$stamp"
log "done in $((SECONDS - start))s: $root, $(du -sh "$root" | cut -f1);" \
	"$(grep -E '^(systemd|nodejs)=' "$root/etc/mcpgate-e2e-root" | tr '\n' ' ')"
echo "$root"
