#!/bin/bash
# suite.sh runs the end-to-end tests (internal/e2e) once for each Debian
# release given, side by side: one test binary, DIR/e2e.test (`make
# e2e-prepare` builds it, with the packages and the roots; suite.sh builds
# it if it is not there), each run booting its own release's root
# (MCPGATE_E2E_RELEASE). The runs share them all, and the host's Chromium.
#
# Usage: packaging/e2e/suite.sh DIR RELEASE... [-- test binary flags]
#
# Each run's whole output goes to DIR/e2e-RELEASE.log and, each line
# prefixed with "[RELEASE] ", to stdout. At the end one line per run says
# how it ended and how long it took; the exit status is non-zero if any run
# failed. The environment (MCPGATE_E2E=1, MCPGATE_DEB, …) is passed on.
#
# Environment: GO (default go), to build the test binary.
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 DIR RELEASE... [-- test binary flags, such as -test.run=TestLintian]" >&2; exit 2; }
dir=$1
shift
releases=()
while [[ $# -gt 0 && $1 != -- ]]; do
	releases+=("$1")
	shift
done
[[ ${1:-} == -- ]] && shift
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# One build of the test binary for every run.
if [[ ! -x $dir/e2e.test ]]; then
	(cd "$top" && "${GO:-go}" test -c -o "$dir/e2e.test" ./internal/e2e)
fi

pids=()
start=$SECONDS
for r in "${releases[@]}"; do
	(
		began=$SECONDS
		cd "$top/internal/e2e"
		set +e
		MCPGATE_E2E_RELEASE=$r "$dir/e2e.test" -test.v -test.count=1 -test.timeout=25m "$@" 2>&1 |
			tee "$dir/e2e-$r.log" | sed -u "s/^/[$r] /"
		status=${PIPESTATUS[0]}
		echo "$status $((SECONDS - began))" >"$dir/e2e-$r.status"
		exit "$status"
	) &
	pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do
	wait "$pid" || failed=1
done
for r in "${releases[@]}"; do
	read -r status took <"$dir/e2e-$r.status"
	verdict=ok
	[[ $status == 0 ]] || verdict="FAILED (exit $status)"
	printf 'e2e on %s: %s in %dm%02ds; log %s\n' "$r" "$verdict" $((took / 60)) $((took % 60)) "$dir/e2e-$r.log"
done
printf 'e2e: %d releases in %dm%02ds\n' "${#releases[@]}" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
exit "$failed"
