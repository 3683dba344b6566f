#!/usr/bin/env bash
# The README's main command: install what is missing, then run airlink's main job on
# the bundled example data. Output lands in ./demo-output (or the folder given).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
OUT=${1:-demo-output}
mkdir -p "$OUT"
AIRLINK=.venv/bin/airlink
EXAMPLE="$OUT/48mbps.parquet"
$AIRLINK trace constant 48Mbps --duration 10s --tti 0.5ms -o "$EXAMPLE"
$AIRLINK trace info "$EXAMPLE"
$AIRLINK trace plot "$EXAMPLE" -o "$OUT/capacity.png"
$AIRLINK trace convert "$EXAMPLE" "$OUT/48mbps.down" --opportunity-bytes 1500
echo "demo: wrote $OUT/capacity.png and $OUT/48mbps.down"
