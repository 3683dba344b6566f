"""Packets the capture tool itself counted as dropped: pcapng interface statistics blocks
(``isb_ifdrop`` + ``isb_osdrop``, the last block of each interface of each section) -
crafted files worked by hand from the pcapng layout, and a real dumpcap capture in a
namespace (its statistics present, nothing dropped)."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from airlink import collectors as C
from airlink.collectors._capture import CaptureReader

from tests.collectors.pcapcraft import _block, link_wrap, pcap_bytes, pcapng_bytes, tcp_packet

T0 = 1_700_000_000 * 10**9


def isb(iface, *, ifrecv=None, ifdrop=None, osdrop=None) -> bytes:
    """An interface statistics block (type 5): interface id, timestamp, then the options
    given (isb_ifrecv 4, isb_ifdrop 5, isb_osdrop 7: 8-byte counters), opt_endofopt."""
    opts = b""
    for code, v in ((4, ifrecv), (5, ifdrop), (7, osdrop)):
        if v is not None:
            opts += struct.pack("<HHQ", code, 8, v)
    return _block(5, struct.pack("<III", iface, 0, 0) + opts + struct.pack("<HH", 0, 0))


def section(n, t0):
    frames = [(i % 2, t0 + i * 1_000_000, link_wrap(tcp_packet(seq=1 + 10 * i, payload=b"x" * 10), 1))
              for i in range(n)]
    return pcapng_bytes([(1, None), (1, 9)], frames)


def test_drop_counters_of_every_interface_and_section(tmp_path):
    """Section 1: interface 0 reports twice (cumulative: the last, 7 + 2, counts),
    interface 1 drops in the OS only (4); section 2: interface 0 drops 5 at the interface,
    interface 1 reports received packets but no drop counter. 9 + 4 + 5 = 18."""
    f = tmp_path / "drops.pcapng"
    f.write_bytes(section(20, T0) + isb(0, ifdrop=3, osdrop=0) + isb(0, ifrecv=100, ifdrop=7, osdrop=2)
                  + isb(1, osdrop=4) + section(10, T0 + 10**9) + isb(0, ifdrop=5) + isb(1, ifrecv=30))
    r = CaptureReader(f)
    assert sum(len(b.data_off) for b in r) == 30
    assert r.dropped == 18
    assert C.read_pcap(f).attrs["capture_dropped"] == 18
    assert C.analyze_tcp(f).attrs["capture_dropped"] == 18
    assert C.analyze_tcp(f, max_packets=8).attrs["capture_dropped"] == 18        # census and groups
    script = Path(sys.executable).with_name("airlink")
    r = subprocess.run([str(script), "collect", str(f), "-o", str(tmp_path / "out"), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"][0]["capture_dropped"] == 18
    assert "the capture tool counted 18 packets it dropped" in r.stderr


def test_no_counters_no_claim(tmp_path):
    """A classic pcap keeps no drop counter, a pcapng may not: nothing is claimed."""
    frames = [(T0 + i * 10**6, link_wrap(tcp_packet(seq=1 + 10 * i, payload=b"x" * 10), 1)) for i in range(5)]
    for name, data in (("a.pcap", pcap_bytes(frames)), ("b.pcapng", section(5, T0))):
        f = tmp_path / name
        f.write_bytes(data)
        assert CaptureReader(f).dropped is None
        assert "capture_dropped" not in C.analyze_tcp(f).attrs


@pytest.mark.netns
def test_dumpcaps_statistics_read_from_a_live_capture(test_ns, tmp_path):
    """dumpcap writes an interface statistics block when it stops: a real capture of a TCP
    transfer on the namespace's loopback reads with its counter present and 0 dropped."""
    if not shutil.which("dumpcap"):
        pytest.skip("dumpcap is not installed (scripts/bootstrap installs wireshark's tools)")
    f = tmp_path / "live.pcapng"
    dump = test_ns.popen(["dumpcap", "-q", "-i", "lo", "-a", "packets:30", "-w", str(f)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):                   # short TCP exchanges until dumpcap has its packets
            test_ns.exec([sys.executable, "-c",
                          "import socket, threading\n"
                          "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                          "c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n"
                          "c.sendall(b'x' * 3000); a.recv(3000); c.close(); a.close(); s.close()\n"], timeout=30)
            if dump.poll() is not None:
                break
        dump.wait(timeout=30)
    finally:
        if dump.poll() is None:
            dump.kill()
            dump.wait()
        dump.stderr.close()
    r = CaptureReader(f)
    assert sum(len(b.data_off) for b in r) == 30
    assert r.dropped == 0
    assert C.analyze_tcp(f).attrs["capture_dropped"] == 0
