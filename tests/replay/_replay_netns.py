"""Helpers for replay tests with real packets: every shell runs inside a fresh test namespace.

``test_ns`` creates ``airlink-test-<pid>-<n>`` (loopback up) and deletes it, killing what
is left inside, even when the test fails; the root namespace is never touched. Servers
(iperf3 -s) listen in the test namespace, i.e. on the shells' outer side.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
AIRLINK = str(VENV_BIN / "airlink")
_counter = itertools.count()


class TestNS:  # noqa: not a test class
    __test__ = False

    """A throw-away network namespace to run shells and servers in."""

    def __init__(self):
        self.name = f"airlink-test-{os.getpid()}-{next(_counter)}"
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        self.exec(["ip", "link", "set", "lo", "up"], check=True)
        self.servers = []

    def env(self, extra=None):
        env = dict(os.environ)
        env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}"
        for k in ("AIRLINK_BASE", "AIRLINK_BLOCK", "AIRLINK_DEPTH", "SUDO_UID", "SUDO_GID", "SUDO_USER"):
            env.pop(k, None)
        env.update(extra or {})
        return env

    def exec(self, argv, *, check=False, timeout=120, env=None, **kw):
        return subprocess.run(["ip", "netns", "exec", self.name, *argv], capture_output=True,
                              text=True, check=check, timeout=timeout, env=self.env(env), **kw)

    def popen(self, argv, env=None, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.name, *argv], env=self.env(env), **kw)

    def airlink(self, *args, timeout=120, env=None):
        return self.exec([AIRLINK, *map(str, args)], timeout=timeout, env=env)

    def server(self, argv, port: int, what: str):
        """Start ``argv`` in the namespace (stopped by :meth:`close`) and wait until a TCP
        socket listens on ``port``; RuntimeError naming ``what`` after 5 s."""
        p = self.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.servers.append(p)
        for _ in range(100):
            if f":{port} " in self.exec(["ss", "-ltnH"]).stdout:
                return p
            time.sleep(0.05)
        raise RuntimeError(f"{what} did not start")

    def script_server(self, script: Path):
        """Run the Python ``script`` in the namespace (stopped by :meth:`close`) and wait for
        the ``ready`` line it prints once it listens."""
        p = self.popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
        self.servers.append(p)
        assert p.stdout.readline().strip() == "ready"
        return p

    def iperf_server(self, port=5201):
        return self.server(["iperf3", "-s", "-p", str(port)], port, "iperf3 server")

    def links(self):
        return self.exec(["ip", "-o", "link"]).stdout

    def routes(self):
        return self.exec(["ip", "-4", "route"]).stdout

    def close(self):
        for p in self.servers:
            p.kill()
            p.wait()
        pids = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def iperf_goodput_bps(result_json: str) -> float:
    """Receiver goodput of an iperf3 --json run (bits per second of TCP payload)."""
    d = json.loads(result_json)
    if "error" in d:
        raise AssertionError(f"iperf3 failed: {d['error']}")
    return d["end"]["sum_received"]["bits_per_second"]


def read_stats(path) -> dict:
    return json.loads(Path(path).read_text())


def assert_conserved(stats: dict):
    """Per direction: arrivals = departures + drops + still queued; no kernel drops."""
    for d in ("downlink", "uplink"):
        s = stats[d]
        assert s["arrivals_bytes"] == s["departures_bytes"] + s["drops_bytes"] + s["queued_bytes"], (d, s)
        assert s["arrivals_packets"] == s["departures_packets"] + s["drops_packets"] + s["queued_packets"], (d, s)
    for side in ("outer", "inner"):
        k = stats["kernel"][side]
        assert k is not None and k["tx_dropped"] == 0 and k["rx_dropped"] == 0, (side, k)
    assert stats["write_errors"] == 0


def marked_processes(marker: str, comm: str | None = None) -> list:
    """Pids of processes whose environment holds the entry ``marker`` (``KEY=VALUE``, which
    every child of a test's command inherits) and, when given, whose name is ``comm``."""
    out = []
    entry = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if entry in env and (comm is None or name == comm):
            out.append(int(pid))
    return out
