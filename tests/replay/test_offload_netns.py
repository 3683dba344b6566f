"""Offload mode with real packets through real namespaces: TCP data crosses the shells
intact (the kernel accepts the pieces the shell cuts: lengths, sequence numbers,
checksums), the counters are conserved, and plain mode (AIRLINK_OFFLOAD=0) still runs.

The server (in the test namespace, outside the shells) sends a known byte stream; the
client inside the innermost shell prints its SHA-256, which must be the sender's.
"""
from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import time

import pytest

from tests.replay._replay_netns import assert_conserved, read_stats

pytestmark = [pytest.mark.netns]

SIZE = 6_000_000
PORT = 5301
SERVER = f"""
import random, socket
data = random.Random(7).randbytes({SIZE})
s = socket.create_server(("0.0.0.0", {PORT}))
c, _ = s.accept()
c.sendall(data)
c.close()
"""
CLIENT = """
import hashlib, os, socket
c = socket.create_connection((os.environ["AIRLINK_BASE"], {port}))
h, n = hashlib.sha256(), 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b)
    n += len(b)
print(n, h.hexdigest())
"""


def start_server(test_ns):
    p = test_ns.popen([sys.executable, "-c", SERVER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    test_ns.servers.append(p)
    for _ in range(100):
        if f":{PORT} " in test_ns.exec(["ss", "-ltnH"]).stdout:
            return
        time.sleep(0.05)
    raise RuntimeError("test server did not start")


def constant_trace(path, mbps):
    path.write_text("1\n" * int(mbps // 12))      # Mahimahi: mbps/12 opportunities per ms
    return path


@pytest.mark.parametrize("offload,threads", [("1", "1"), ("0", "1"), ("1", "2")])
@pytest.mark.parametrize("chain", ["link", "delay+loss+link"])
def test_tcp_stream_crosses_cut_super_packets_intact(test_ns, tmp_path, offload, threads, chain):
    trace = constant_trace(tmp_path / "c.down", 120)
    link = ["link", trace, "--downlink-queue", "droptail", "--downlink-queue-args", "packets=60",
            "--stats", tmp_path / "link.json"]
    argv = link if chain == "link" else \
        ["delay", "3", "--stats", tmp_path / "delay.json", "airlink", "loss", "downlink", "0.002",
         "--seed", "5", "--stats", tmp_path / "loss.json", "airlink", *link]
    start_server(test_ns)
    r = test_ns.airlink(*argv, "--", sys.executable, "-c", CLIENT.format(port=PORT), timeout=120,
                        env={"AIRLINK_OFFLOAD": offload, "AIRLINK_RELAY_THREADS": threads})
    assert r.returncode == 0, r.stderr
    want = hashlib.sha256(random.Random(7).randbytes(SIZE)).hexdigest()
    assert r.stdout.split() == [str(SIZE), want]
    for name in ("link", "delay", "loss"):
        path = tmp_path / f"{name}.json"
        if not path.exists():
            continue
        st = read_stats(path)
        assert_conserved(st)
        assert st["offload"] is (offload == "1")
        assert st["engine"] == "c"
        assert st.get("threads", 1) == int(threads)
        if name == "link" and offload == "1":
            # super-packets arrived and the 1.5 kB-per-0.1 ms budgets (and the queue) cut them
            assert st["downlink"]["superpackets"] > 0
            assert st["downlink"]["pieces_cut"] > 0
        if name == "link":
            assert st["downlink"]["departures_bytes"] <= st["downlink"]["capacity_bytes"]


def test_logs_keep_the_fast_path_and_log_per_segment(test_ns, tmp_path):
    """With a log, the shell keeps the C fast path and offload mode; the log has one line
    per segment (1500 bytes or smaller), never a super-packet, as without offload."""
    from airlink.traces import read_log
    trace = constant_trace(tmp_path / "c.down", 48)
    start_server(test_ns)
    r = test_ns.airlink("link", trace, "--downlink-log", tmp_path / "down.log", "--stats", tmp_path / "s.json",
                        "--", sys.executable, "-c", CLIENT.format(port=PORT), timeout=120,
                        env={"AIRLINK_OFFLOAD": "1"})
    assert r.returncode == 0, r.stderr
    st = read_stats(tmp_path / "s.json")
    assert st["engine"] == "c"
    assert_conserved(st)
    log = read_log(tmp_path / "down.log")
    deps = log[log["event"] == "departure"]
    assert deps["bytes"].max() <= 1500
    assert deps["bytes"].sum() == st["downlink"]["departures_bytes"]
