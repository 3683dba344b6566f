"""The IP ECN field (RFC 3168) in the packets frame and per-flow ECN counts in the flows
frame, against tshark's ip.dsfield.ecn / ipv6.tclass on a capture made with scapy and on the
real captures."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors import _capture

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")


def ecn_capture(path):
    """Two TCP flows, IPv4 (TOS) and IPv6 (traffic class), every ECN codepoint under
    several DSCPs, ECE/CWR flags on some segments."""
    scapy = pytest.importorskip("scapy.all")
    pkts, t = [], 1_700_000_000.0
    # fixed MAC addresses: without them scapy asks ARP for each packet's destination
    ether = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    for i in range(40):
        dscp, ecn = (i * 7) % 64, i % 4
        flags = "A" + ("E" if i % 5 == 0 else "") + ("C" if i % 3 == 0 else "")
        p4 = scapy.Ether(**ether) / scapy.IP(src="10.0.0.1", dst="10.0.0.2", tos=dscp << 2 | ecn) / \
            scapy.TCP(sport=40000, dport=80, seq=1000 + i, flags=flags) / (b"x" * 10)
        p6 = scapy.Ether(**ether) / scapy.IPv6(src="fd00::1", dst="fd00::2", tc=dscp << 2 | (3 - ecn)) / \
            scapy.TCP(sport=40001, dport=443, seq=5000 + i, flags=flags) / (b"y" * 10)
        for k, p in enumerate((p4, p6)):
            p.time = t + i * 0.001 + k * 0.0005
            pkts.append(p)
    scapy.wrpcap(str(path), pkts)


def tshark_ecn(path):
    res = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-E", "separator=,",
                          "-e", "frame.time_epoch", "-e", "ip.dsfield.ecn", "-e", "ipv6.tclass",
                          "-e", "tcp.flags"], capture_output=True, text=True, check=True)
    out = []
    for line in res.stdout.splitlines():
        t, e4, tc6, flags = line.split(",")
        ecn = int(e4) if e4 else int(tc6, 16 if tc6.startswith("0x") else 10) & 3
        out.append((t, ecn, int(flags, 16) & 0xFF if flags else 0))
    return out


def test_ecn_ce_flags_against_tshark(tmp_path, monkeypatch):
    f = tmp_path / "ecn.pcap"
    ecn_capture(f)
    theirs = tshark_ecn(f) if shutil.which("tshark") else None
    if theirs is None:
        pytest.skip("tshark is not installed")
    for c_decoder in (True, False):
        monkeypatch.setattr(_capture, "_records", _capture._records if c_decoder else None)
        pk = C.read_pcap(f)                            # in time order, as tshark lists them here
        assert pk["ecn"].tolist() == [e for _, e, _ in theirs]
        assert pk["flags"].tolist() == [fl for _, _, fl in theirs]
    # per flow: ECT(0) = 2, ECT(1) = 1, CE = 3 counted over both directions
    want = {}
    for (fl, e) in zip(pk["flow"], pk["ecn"]):
        want.setdefault(fl, [0, 0, 0, 0])[e] += 1
    for flows in (C.analyze_tcp(pk).flows, C.analyze_tcp(f).flows, C.analyze_tcp(f, max_packets=7).flows):
        got = {fl: [a, b, c] for fl, a, b, c in zip(flows["flow"], flows["ect0_packets"],
                                                     flows["ect1_packets"], flows["ce_packets"])}
        assert got == {fl: [v[2], v[1], v[3]] for fl, v in want.items()}
        assert sorted(got.values()) == [[10, 10, 10], [10, 10, 10]]


@needs_tshark
def test_ecn_on_real_captures(shared_data):
    """Real captures (none of them ECN-capable: every packet Not-ECT, as tshark says)."""
    base = shared_data / "tcp-pcaps"
    for src in (base / "zeek-head/206_example_b.pcap", base / "zeek-head/ssh.pcap",
                base / "tcprs/composite/comp005.trace", base / "tcprs/rto/rto001.trace"):
        pk = C.read_pcap(src)
        theirs = tshark_ecn(src)
        assert sorted(zip(pk["ecn"].tolist(), pk["flags"].tolist())) == sorted((e, f) for _, e, f in theirs)
        flows = C.analyze_tcp(src).flows
        assert (flows[["ect0_packets", "ect1_packets", "ce_packets"]].to_numpy() == 0).all()
