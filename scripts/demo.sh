#!/usr/bin/env bash
# The README's main command: install what is missing, then run airlink's main job - the
# whole loop of examples/pf-cell.yaml (simulate a Proportional Fair cell, replay user 1's
# capacity under a live cubic download, capture, collect, infer, report) - into
# ./demo-output (or the folder given). As root the live stage runs in a network namespace
# of its own that is removed afterwards; without root airlink says why and runs the offline
# stages on the example captures instead. Running it again replaces the earlier demo's own
# files (--overwrite removes only what the earlier run's manifest lists).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
OUT=${1:-demo-output}
AIRLINK=.venv/bin/airlink
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
  NS="airlink-demo-$$"
  ip netns add "$NS"
  trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
  ip netns exec "$NS" ip link set lo up
  ip netns exec "$NS" $AIRLINK run examples/pf-cell.yaml -o "$OUT" --overwrite
else
  $AIRLINK run examples/pf-cell.yaml -o "$OUT" --overwrite
fi
echo "demo: open $OUT/report.html"
