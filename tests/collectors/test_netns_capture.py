"""A real tcpdump capture of a real TCP transfer between two namespaces, in every link type
the experiment engineers capture with (Ethernet, Linux cooked v1/v2 via -i any)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from airlink import collectors as C
from benchmarks._netns import start_tcpdump

pytestmark = pytest.mark.netns

NS_A, NS_B = f"alcol-a-{os.getpid()}", f"alcol-b-{os.getpid()}"


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def namespaces(root_netns):
    if not (shutil.which("tcpdump") and shutil.which("iperf3")):
        pytest.skip("needs tcpdump and iperf3")
    try:
        sh("ip", "netns", "add", NS_A)
        sh("ip", "netns", "add", NS_B)
        sh("ip", "link", "add", "alc-a", "netns", NS_A, "type", "veth", "peer", "name", "alc-b", "netns", NS_B)
        for ns, dev, addr in ((NS_A, "alc-a", "10.232.0.1/24"), (NS_B, "alc-b", "10.232.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield
    finally:
        for ns in (NS_A, NS_B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.parametrize("iface,linktype,want", [("alc-b", None, 1), ("any", "LINUX_SLL", 113),
                                                 ("any", "LINUX_SLL2", 276)])
def test_real_transfer(namespaces, tmp_path, iface, linktype, want):
    cap = tmp_path / "c.pcap"
    # --immediate-mode: without it the packets of the ring block still open when tcpdump is
    # stopped (up to its 1 s block timeout) are never written
    cmd = ["ip", "netns", "exec", NS_B, "tcpdump", "-i", iface, "-s", "128", "-w", str(cap), "-U",
           "--immediate-mode", "tcp port 5201"]
    if linktype:
        cmd[7:7] = ["-y", linktype]
    dump = start_tcpdump(cmd)
    srv = subprocess.Popen(["ip", "netns", "exec", NS_A, "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    t_end = time.monotonic() + 20       # the client retries nothing: wait for the server's listen
    while ":5201" not in sh("ip", "netns", "exec", NS_A, "ss", "-ltnH").stdout and time.monotonic() < t_end:
        time.sleep(0.05)
    try:
        sh("ip", "netns", "exec", NS_B, "iperf3", "-c", "10.232.0.1", "-R", "-n", "4M", "-b", "200M")
    finally:
        srv.wait(timeout=10)
        time.sleep(0.5)
        dump.terminate()
        dump.wait(timeout=10)
        dump.stderr.close()
    pk = C.read_pcap(cap)
    assert pk.attrs["linktypes"] == [want]
    a = C.analyze_tcp(pk)
    fl = a.flows.sort_values("bytes_rev", ascending=False).iloc[0]
    assert fl["dport"] == 5201 and fl["src"] == "10.232.0.2"       # client opened it
    # -R: the server sends; 4 MB of payload went server -> client
    data = a.series[(a.series["flow"] == fl["flow"]) & (a.series["direction"] == "rev")]
    assert data["throughput_bps"].sum() * a.resolution_s / 8 >= 4_000_000
    assert fl["rtt_samples"] > 10 and fl["mss_bytes"] > 0 and fl["timestamps"]
    assert fl["retransmissions"] == 0
