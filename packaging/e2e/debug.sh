#!/bin/bash
# debug.sh boots a cached e2e root the way internal/e2e does, and runs a
# command in it, by default an interactive shell; the container is powered
# off when that command ends.
#
# Usage: packaging/e2e/debug.sh [--suite=bookworm|trixie] [--bind=HOST:CONTAINER]...
#                               [command [arg...]]
#
# Examples:
#   packaging/e2e/debug.sh                          # a root shell in bookworm
#   packaging/e2e/debug.sh --suite=trixie --bind=$PWD/dist:/mnt/dist bash
#   packaging/e2e/debug.sh systemctl list-units --failed
#
# The container has its own network namespace (only lo), a tmpfs overlay
# over the read-only cached root (nothing persists), and its console log in
# $console_log (printed at start). mkroot.sh builds the root first if needed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf 'debug: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

binds=()
suite=bookworm
while [[ $# -gt 0 && $1 == --* ]]; do
	case $1 in
	--bind=* | --bind-ro=*) binds+=("$1") ;;
	--suite=*) suite=${1#--suite=} ;;
	-h | --help)
		sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	--) shift; break ;;
	*) die "unknown option \"$1\" (try --help)" ;;
	esac
	shift
done
[[ $# -gt 0 ]] || set -- bash -l
[[ $(id -u) == 0 ]] || die "must run as root"

root=$("$here/mkroot.sh" --suite="$suite")
cache=$(dirname "$root")
# A shared lock keeps mkroot.sh from replacing the root while it is booted.
exec 8>>"$cache/$suite-root.lock"
flock -s 8

name=mcpgate-e2e-debug-$$
console_log=$(mktemp "/tmp/$name.XXXXXX.log")

# Without a systemd PID 1 on the host, nspawn runs with --keep-unit in a
# cgroup of its own, in every hierarchy (see internal/e2e/container.go).
cgroups=()
keep_unit=()
if [[ ! -d /run/systemd/system ]]; then
	keep_unit=(--keep-unit)
	if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
		hierarchies=(/sys/fs/cgroup)
	else
		hierarchies=()
		for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
			[[ $(stat -fc %T "$h" 2>/dev/null) == cgroup* ]] && hierarchies+=("$h")
		done
	fi
	for h in "${hierarchies[@]}"; do
		mkdir -p "$h/mcpgate-e2e/$name"
		cgroups+=("$h/mcpgate-e2e/$name")
	done
fi

nspawn_pid=
cleanup() {
	if [[ -n $nspawn_pid ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
		log "powering off $name"
		kill -TERM "$nspawn_pid"
		wait "$nspawn_pid" || true
	fi
	local d
	for d in "${cgroups[@]}"; do
		[[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
		rmdir "$(dirname "$d")" 2>/dev/null || true
	done
	log "console log kept in $console_log"
}
trap cleanup EXIT

(
	for d in "${cgroups[@]}"; do echo "$BASHPID" >"$d/cgroup.procs"; done
	SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 exec systemd-nspawn --boot --directory="$root" \
		--machine="$name" --uuid="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
		--volatile=overlay --private-network --register=no "${keep_unit[@]}" \
		--console=read-only --link-journal=no --resolv-conf=off --timezone=off "${binds[@]}"
) >"$console_log" 2>&1 </dev/null &
nspawn_pid=$!
log "booting $name (systemd-nspawn PID $nspawn_pid), console log $console_log"

# The container's init is nspawn's child; wait (up to 60s) for it to appear.
init_pid=
for _ in $(seq 600); do
	init_pid=$(pgrep -P "$nspawn_pid" -x systemd || true)
	[[ -n $init_pid ]] && break
	kill -0 "$nspawn_pid" 2>/dev/null || die "systemd-nspawn exited; see $console_log"
	sleep 0.1
done
[[ -n $init_pid ]] || die "no init after 60s; see $console_log"
# Until the container's system bus is up, systemctl cannot even ask.
state=
for _ in $(seq 600); do
	state=$(timeout 120 nsenter --target="$init_pid" --all -- systemctl is-system-running --wait 2>/dev/null || true)
	[[ -n $state ]] && break
	sleep 0.1
done
log "$name is $state; init PID $init_pid"
log "enter it from elsewhere with: nsenter --target=$init_pid --all -- bash -l"
log "running: $*"
set +e
nsenter --target="$init_pid" --all -- /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@"
status=$?
set -e
exit "$status"
