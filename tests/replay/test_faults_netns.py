"""Faults under a running shell (issue #12): a full disk while logging, a TUN device removed
from outside, a command that resets its connections. Each ends with one clear line (no
traceback), nothing left behind (namespace, device, process), and no output under its final
name unless it is complete (an unfinished log stays ``NAME.partial``)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tests.replay._replay_netns import AIRLINK
from tests.cext import c_extension
from tests.replay.test_cleanup_netns import assert_clean

pytestmark = [pytest.mark.netns]

NS_MARK = "readlink /proc/self/ns/net > {marker}.tmp && mv {marker}.tmp {marker}; "


def _constant_trace(tmp_path, per_ms: int = 2):
    """A 1 s Mahimahi trace of ``per_ms`` 1500-byte opportunities per ms (12 Mbit/s per unit)."""
    p = tmp_path / "c.down"
    p.write_text("".join(f"{t}\n" for t in range(1, 1001) for _ in range(per_ms)))
    return p


def _one_clean_line(stderr: str, *words):
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    lines = [l for l in stderr.splitlines() if l.startswith("airlink: error:")]
    assert len(lines) == 1, stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs: a logging run of a few seconds fills it."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_while_logging(test_ns, tmp_path, tiny_disk):
    test_ns.iperf_server(5301)
    marker = tmp_path / "ns"
    logs = {"down.log": "--downlink-log", "tti.parquet": "--downlink-tti-log", "up.log": "--uplink-log"}
    args = [a for name, flag in logs.items() for a in (flag, tiny_disk / name)]
    r = test_ns.airlink("link", _constant_trace(tmp_path), "--uplink", _constant_trace(tmp_path), *args,
                        "--stats", tiny_disk / "stats.json", "--",
                        "sh", "-c", NS_MARK.format(marker=marker) +
                        "iperf3 -c $AIRLINK_BASE -p 5301 -R -t 4 >/dev/null", timeout=60)
    assert r.returncode == 2, r.stderr
    line = _one_clean_line(r.stderr, "no space left on device")
    assert any(name in line for name in logs), line
    left = sorted(p.name for p in tiny_disk.iterdir())
    # the failed log is kept under a name that does not claim completeness; no stats of a
    # run that failed; a log that did finish may keep its final name only if it parses whole
    assert any(n.endswith(".partial") for n in left), left
    assert "stats.json" not in left
    for name in logs:
        if name in left and name.endswith(".log"):
            from airlink.traces import read_log
            read_log(tiny_disk / name)
    assert_clean(test_ns, marker.read_text().strip())


@pytest.mark.parametrize("engine", ["c", "c-2-threads", "python"])
def test_tun_device_removed_under_a_running_shell(test_ns, tmp_path, engine):
    if engine.startswith("c"):
        c_extension("airlink.replay._fastpath")
    test_ns.iperf_server(5302)
    marker = tmp_path / "ns"
    log = ["--downlink-log", tmp_path / "down.log"] if engine != "c-2-threads" else []   # logs: one thread
    p = test_ns.popen([AIRLINK, "link", str(_constant_trace(tmp_path)), *map(str, log), "--", "sh", "-c",
                       NS_MARK.format(marker=marker) + "iperf3 -c $AIRLINK_BASE -p 5302 -R -t 30 >/dev/null"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                      env={"AIRLINK_RELAY_THREADS": "2" if engine == "c-2-threads" else "1",
                           **({"AIRLINK_PURE_PYTHON": "1"} if engine == "python" else {})})
    deadline = time.monotonic() + 20
    while not marker.exists():
        assert p.poll() is None and time.monotonic() < deadline, "CMD did not start"
        time.sleep(0.05)
    time.sleep(1.0)
    devices = [l.split(":")[1].strip().split("@")[0] for l in test_ns.links().splitlines()]
    shell_devices = [d for d in devices if d != "lo"]
    assert shell_devices, devices
    for d in shell_devices:           # removed from outside, as a careless script would
        test_ns.exec(["ip", "link", "del", d])
    status = p.wait(timeout=30)
    stderr = p.stderr.read()
    assert status == 2, stderr
    _one_clean_line(stderr, "network device", "CMD was stopped")
    assert not (tmp_path / "down.log").exists()
    assert_clean(test_ns, marker.read_text().strip())


ABRUPT_CLIENT = r"""
import socket, struct, sys, time
s = socket.create_connection((sys.argv[1], 5303))
s.sendall(b"x" * 200000)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()                                   # RST with data in flight
"""


def test_cmd_that_resets_its_connections(test_ns, tmp_path):
    """A CMD that aborts its TCP connections (RST, data queued in the link) and exits: the
    shell returns CMD's status, logs are complete, conservation holds."""
    srv = test_ns.popen([sys.executable, "-c",
                         "import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                         "s.bind(('0.0.0.0', 5303)); s.listen(8)\n"
                         "while True:\n  c,_=s.accept()\n  try:\n    while c.recv(65536): pass\n"
                         "  except OSError: pass\n  c.close()\n"])
    test_ns.servers.append(srv)
    time.sleep(0.5)
    marker = tmp_path / "ns"
    stats = tmp_path / "s.json"
    trace = _constant_trace(tmp_path, per_ms=1)
    r = test_ns.airlink("link", trace, "--uplink", trace, "--uplink-log", tmp_path / "up.log", "--stats", stats,
                        "--", "sh", "-c", NS_MARK.format(marker=marker) +
                        f"for i in 1 2 3; do {sys.executable} -c '{ABRUPT_CLIENT}' $AIRLINK_BASE; done; exit 3",
                        timeout=60)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    from tests.replay._replay_netns import read_stats
    st = read_stats(stats)
    up = st["uplink"]
    assert up["arrivals_bytes"] == up["departures_bytes"] + up["drops_bytes"] + up["queued_bytes"]
    from airlink.traces import read_log
    log = read_log(tmp_path / "up.log")
    assert int(log.loc[log["event"] == "arrival", "bytes"].sum()) == up["arrivals_bytes"]
    assert_clean(test_ns, marker.read_text().strip())
