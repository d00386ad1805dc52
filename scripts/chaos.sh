#!/usr/bin/env bash
# Runs the chaos soak (e2e TestChaosSoak): `tandem up`'s deployment with 2
# prefill and 2 decode workers under random load, client disconnects and a
# worker SIGKILLed and restarted mid-load, then checks through /debug/rooms,
# /debug/cluster and /metrics that no room is pinned and no page leaked.
#
#   scripts/chaos.sh [requests] [soak flags...]
#
# requests defaults to 3000 (CI's `go test ./e2e` runs 300). Soak flags are
# passed to the test binary, e.g. -chaos.seed=42 -chaos.concurrency=32
# -chaos.pause=2s -chaos.kill=false -chaos.log=/tmp/cluster.log. The summary
# table is printed again at the end; the exit status is the test's.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

n="${1:-3000}"
if [ "$#" -gt 0 ]; then shift; fi
case "$n" in
  ''|*[!0-9]*) echo "usage: scripts/chaos.sh [requests] [soak flags...]: requests must be a number, got '$n'" >&2; exit 2 ;;
esac

out="$(mktemp "${TMPDIR:-/tmp}/tandem-chaos-XXXXXX.out")"
start=$(date +%s)
set +e
go test ./e2e -run '^TestChaosSoak$' -count=1 -v -timeout 30m -args -chaos.requests "$n" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e

echo
sed -n '/=== CHAOS SUMMARY/,/=== END CHAOS SUMMARY/p' "$out" | sed 's/^ \{8\}//'
if ! grep -q '=== CHAOS SUMMARY' "$out"; then
  echo "(no summary: the soak stopped before its end; see $out)"
fi
echo "chaos soak: $n requests, exit status $rc, $(( $(date +%s) - start ))s wall; full output in $out"
exit "$rc"
