#!/usr/bin/env bash
# The README's test command: install what is missing, then run the whole test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k mahimahi`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec .venv/bin/python -m pytest -ra --durations=25 "$@"
