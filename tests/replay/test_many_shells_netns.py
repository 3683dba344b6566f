"""Many shells at once: 72 shells (more than 64) run side by
side, each sees its own address block and addresses, and all of it is gone afterwards."""
from __future__ import annotations

import ipaddress
import subprocess
import time

import pytest

from tests.replay._replay_netns import AIRLINK

pytestmark = [pytest.mark.netns]

N = 72


def test_many_shells_at_once_get_distinct_blocks_and_leave_nothing(test_ns, tmp_path):
    seen = tmp_path / "seen"
    seen.mkdir()
    # every CMD writes what it sees, then waits for the go (given once all N are running)
    go = tmp_path / "go"
    cmd = (f'ip -o -4 addr show dev airlink0 | awk "{{print \\$4}}" > {seen}/$I.tmp; '
           f'echo "$AIRLINK_BLOCK $AIRLINK_BASE" >> {seen}/$I.tmp; mv {seen}/$I.tmp {seen}/$I; '
           f'while [ ! -e {go} ]; do sleep 1; done')
    procs = [test_ns.popen([AIRLINK, "delay", "1", "--", "sh", "-c", cmd], env={"I": str(i)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(N)]
    def written():  # a CMD's file counts once it is renamed from .tmp (whole)
        return len([f for f in seen.iterdir() if not f.name.endswith(".tmp")])
    deadline = time.monotonic() + 600
    while written() < N and time.monotonic() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.5)
    together = written()
    go.touch()
    errors = []
    for p in procs:
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
        if p.returncode != 0:
            errors.append(p.stderr.read().decode()[-300:])
    assert not errors, errors[:3]
    rows = [(seen / str(i)).read_text().split() for i in range(N)]
    inner = [ipaddress.ip_interface(r[0]) for r in rows]
    blocks = [ipaddress.ip_network(r[1]) for r in rows]
    bases = [r[2] for r in rows]
    # all N were up together, and each had its own /20, its own link /30 inside it
    assert together == N
    assert len(set(blocks)) == N and all(b.prefixlen == 20 for b in blocks)
    assert all(not a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1:])
    assert len({str(a.ip) for a in inner}) == N
    assert all(a.network.prefixlen == 30 and a.ip in b and str(a.ip - 1) == base
               for a, b, base in zip(inner, blocks, bases))
    deadline = time.monotonic() + 10
    while test_ns.links().count("\n") > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [l.split(":")[1].strip() for l in test_ns.links().splitlines()] == ["lo"]
    assert "100.64" not in test_ns.routes()
