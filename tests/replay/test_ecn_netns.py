"""ECN through a real link shell: an ECN-capable TCP download through CoDel with ``ecn``
sees CE marks (counted by tshark on a capture inside the shell, independently of
airlink's counters) and no drops, where the same download through the dropping CoDel
loses packets; a classic ECN flow through the ``l4s`` queue is marked by PI2, not
dropped, near PI2's delay target; an L4S flow keeps its queue near the step (where the
kernel has a congestion control that sends ECT(1)).

ECN is turned on (``net.ipv4.tcp_ecn=1``) and the congestion control chosen only inside
the test's own namespace (the server) and the shell's namespace (the client).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.replay._replay_netns import assert_conserved, read_stats

pytestmark = [pytest.mark.netns]

SIZE = 4_000_000
PORT = 5311
SERVER = f"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, sys.argv[1].encode())
s.bind(("0.0.0.0", {PORT}))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(bytes({SIZE}))
    c.close()
"""
CLIENT = f"""
import os, socket
c = socket.create_connection((os.environ["AIRLINK_BASE"], {PORT}))
n = 0
while (b := c.recv(1 << 20)):
    n += len(b)
print(n)
"""


def start_server(test_ns, cc):
    r = test_ns.exec(["sysctl", "-w", "net.ipv4.tcp_ecn=1"])
    assert r.returncode == 0, r.stderr
    test_ns.server([sys.executable, "-c", SERVER, cc], PORT, "test server")


def run_download(test_ns, tmp_path, name, *link_args, capture=False):
    """Download SIZE bytes through ``airlink link`` (24 Mbit/s); returns (stats, capture or None)."""
    trace = tmp_path / "c.down"
    trace.write_text("1\n" * 2)                  # 2 opportunities per ms: 24 Mbit/s
    pcap = tmp_path / f"{name}.pcap"
    inside = ("sysctl -qw net.ipv4.tcp_ecn=1; "
              # the download starts once tcpdump has written its file header (it is capturing)
              + (f"tcpdump -Z root -i airlink0 -s 96 -U -w {pcap} 2>/dev/null & pid=$!; "
                 f"for i in $(seq 400); do [ -s {pcap} ] && break; sleep 0.05; done; sleep 0.2; "
                 if capture else "")
              + f"{sys.executable} -c '{CLIENT}'; st=$?; "
              + ("sleep 0.5; kill $pid; wait $pid; " if capture else "") + "exit $st")
    stats = tmp_path / f"{name}.json"
    r = test_ns.airlink("link", trace, *link_args, "--stats", stats, "--", "sh", "-c", inside, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == str(SIZE)
    return read_stats(stats), (pcap if capture else None)


def tshark_count(pcap, display_filter):
    r = subprocess.run(["tshark", "-r", str(pcap), "-Y", display_filter, "-T", "fields", "-e", "frame.number"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return len(r.stdout.split())


@pytest.mark.skipif(shutil.which("tshark") is None or shutil.which("tcpdump") is None,
                    reason="tshark and tcpdump are needed to count CE marks independently")
def test_codel_with_ecn_marks_where_codel_drops(test_ns, tmp_path):
    start_server(test_ns, "cubic")      # BBR ignores ECN; CUBIC halves on CE as on a loss
    marking, pcap = run_download(test_ns, tmp_path, "ecn", "--downlink-queue", "codel", "--downlink-ecn",
                                 capture=True)
    dropping, _ = run_download(test_ns, tmp_path, "drop", "--downlink-queue", "codel")
    for st in (marking, dropping):
        assert_conserved(st)
        assert st["offload"] is False       # CoDel decides per packet: no super-packets
    m, d = marking["downlink"], dropping["downlink"]
    assert d["drops_packets"] > 0 and d["marks_packets"] == 0          # the dropping queue drops ...
    assert m["drops_packets"] == 0 and m["marks_packets"] > 0          # ... the marking one marks
    # the capture (after the link, inside the shell) sees every mark as a CE data packet
    ce = tshark_count(pcap, "ip.dsfield.ecn == 3 && tcp.len > 0")
    ect = tshark_count(pcap, "ip.dsfield.ecn == 2 && tcp.len > 0")
    assert ce == m["marks_packets"]
    assert ect > 10 * ce        # the rest of the data arrived ECT(0): ECN was negotiated


def _l4s_congestion_control():
    """A congestion control sending ECT(1) this kernel has, or None."""
    import socket
    for cc in ("prague",):
        with socket.socket() as s:
            try:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
                return cc
            except OSError:
                pass
    return None


def test_l4s_flow_keeps_the_queue_near_the_step(test_ns, tmp_path):
    cc = _l4s_congestion_control()
    if cc is None:
        available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().strip()
        pytest.skip(f"no congestion control that sends ECT(1) (tcp_prague) on this kernel "
                    f"(available: {available}; no module to load)")
    from airlink.traces import read_log
    start_server(test_ns, cc)
    st, _ = run_download(test_ns, tmp_path, "l4s", "--downlink-queue", "l4s", "--downlink-queue-args", "step=1ms",
                         "--downlink-log", tmp_path / "down.log")
    assert st["downlink"]["marks_packets"] > 0
    log = read_log(tmp_path / "down.log")
    delays = log.loc[log["event"] == "departure", "delay_ms"].to_numpy()
    steady = delays[len(delays) // 4:]          # after slow start
    assert np.median(steady) <= 2 and np.percentile(steady, 90) <= 5


@pytest.mark.skipif(shutil.which("tshark") is None or shutil.which("tcpdump") is None,
                    reason="tshark and tcpdump are needed to count CE marks independently")
def test_classic_ecn_flow_through_the_l4s_queue_is_marked_not_dropped(test_ns, tmp_path):
    """ECT(0) traffic is classic in DualPI2: the PI2 controller marks it with p'^2 instead
    of dropping, and holds its queueing delay near the 15 ms target (the log's departures)."""
    from airlink.traces import read_log
    start_server(test_ns, "cubic")
    st, pcap = run_download(test_ns, tmp_path, "l4s-classic", "--downlink-queue", "l4s",
                            "--downlink-log", tmp_path / "down.log", capture=True)
    assert_conserved(st)
    d = st["downlink"]
    assert d["drops_packets"] == 0 and d["marks_packets"] > 0
    assert tshark_count(pcap, "ip.dsfield.ecn == 3 && tcp.len > 0") == d["marks_packets"]
    log = read_log(tmp_path / "down.log")
    marks = log[log["event"] == "mark"]
    assert marks["packets"].sum() == d["marks_packets"]
    delays = log.loc[log["event"] == "departure", "delay_ms"].to_numpy()
    steady = delays[len(delays) // 4:]          # after slow start
    assert 5 <= np.median(steady) <= 30         # PI2's 15 ms target, within a factor of 2-3
