#!/usr/bin/env bash
# Install what airlink needs on a Debian machine and create .venv (idempotent, quick when done).
# Debian packages are installed only when missing and only as root; without root the
# missing tools are listed and the network tests skip with that reason.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# command:package pairs airlink uses: shells (ip), traffic (iperf3), captures (tcpdump),
# reference tools for tests and benchmarks (tshark, tcptrace), the C fast path (gcc) and a
# real browser as an experiment application (chromium).
APT_TOOLS="ip:iproute2 iperf3:iperf3 tcpdump:tcpdump tshark:tshark tcptrace:tcptrace ping:iputils-ping gcc:gcc chromium:chromium ${AIRLINK_EXTRA_APT:-}"
missing=()
for pair in $APT_TOOLS; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then missing+=(python3 python3-venv python3-dev); fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "airlink: installing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "airlink: missing tools (install as root): ${missing[*]}" >&2
  fi
fi

# Python packages into .venv, reinstalled when setup.cfg or pyproject.toml change.
[ -x .venv/bin/python ] || python3 -m venv .venv
stamp=.venv/.airlink-installed
want=$(cat setup.cfg pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "airlink: installing Python packages into .venv" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[test]'
  echo "$want" > "$stamp"
fi
