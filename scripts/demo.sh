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
EXAMPLE=$(.venv/bin/python -c 'from airlink.traces import example_path; print(example_path("pf-cell-user1.parquet"))')
$AIRLINK trace info "$EXAMPLE"
$AIRLINK trace plot "$EXAMPLE" -o "$OUT/capacity.png"
$AIRLINK trace convert "$EXAMPLE" "$OUT/pf-cell-user1.down" --opportunity-bytes 1500
echo "demo: wrote $OUT/capacity.png and $OUT/pf-cell-user1.down"
