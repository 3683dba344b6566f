"""Provisional connection numbering (collectors/_connections.Connections): the C hash table and
its pure-Python twin give the numbers defined in its docstring, derived here independently
from the packets written into the capture, and agree on the real captures."""
from __future__ import annotations

import ipaddress

import numpy as np
import pytest
from tests.cext import c_records
from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet, udp_packet

from airlink.collectors import _capture
from airlink.collectors._capture import CaptureReader
from airlink.collectors._connections import Connections, decode_connections

V6_BASE = 1 << 32

# (src, dst, sport, dport, proto): IPv4 and IPv6 connections, both directions, UDP, a
# connection that comes back after others, one address in two connections
PACKETS = [("10.0.0.1", "10.0.0.2", 40000, 80, 6), ("10.0.0.2", "10.0.0.1", 80, 40000, 6),
           ("2001:db8::9", "2001:db8::1", 443, 50000, 6), ("10.0.0.1", "10.0.0.2", 40000, 80, 6),
           ("2001:db8::1", "2001:db8::9", 50000, 443, 6), ("10.0.0.3", "10.0.0.1", 5000, 53, 17),
           ("2001:db8::5", "2001:db8::1", 7, 7, 6), ("10.0.0.2", "10.0.0.1", 80, 40000, 6),
           ("10.0.0.1", "10.0.0.3", 53, 5000, 17), ("10.0.0.1", "10.0.0.2", 40001, 80, 6)] * 3


def expected(packets):
    """(numbers, swaps, keys, IPv6 addresses) by the definition, from the packets' fields."""
    v6, keys, numbers, swaps = {}, {}, [], []

    def ident(addr):
        a = ipaddress.ip_address(addr)
        return int(a) if a.version == 4 else V6_BASE + v6.setdefault(int(a), len(v6))
    for src, dst, sport, dport, proto in packets:
        ea, eb = (ident(src) << 16) | sport, (ident(dst) << 16) | dport
        numbers.append(keys.setdefault((min(ea, eb), max(ea, eb), proto), len(keys)))
        swaps.append(ea > eb)
    return numbers, swaps, list(keys), [(a >> 64, a & (2**64 - 1)) for a in v6]


def number_capture(path, *, chunk):
    conns, pflow, swap = Connections(), [], []
    for batch in CaptureReader(path, chunk=chunk):
        d, p, s = decode_connections(batch, conns, set())
        pflow.append(p)
        swap.append(s)
    lo, hi, proto = conns.keys()
    return (np.concatenate(pflow).tolist(), np.concatenate(swap).tolist(),
            list(zip(lo.tolist(), hi.tolist(), proto.tolist())), conns.v6_addresses())


@pytest.fixture(params=["c", "python"])
def mode(request, monkeypatch):
    if request.param == "c":
        c_records("conn_new", "conn_number", "conn_keys", "conn_v6")
    else:
        monkeypatch.setattr(_capture, "_records", None)
    return request.param


def test_numbers_by_definition(mode, tmp_path):
    frames = [(1_000_000_000 + i * 1000,
               link_wrap(udp_packet(s, d, sp, dp) if pr == 17 else
                         tcp_packet(s, d, sp, dp, v6=":" in s), 1))
              for i, (s, d, sp, dp, pr) in enumerate(PACKETS)]
    f = tmp_path / "mixed.pcap"
    f.write_bytes(pcap_bytes(frames))
    # batches of a few packets: the numbering carries across them
    assert number_capture(f, chunk=300) == expected(PACKETS)


def test_c_and_python_agree_on_real_captures(shared_data, monkeypatch):
    c_records("conn_new", "conn_number", "conn_keys", "conn_v6")
    caps = sorted(p for p in (shared_data / "tcp-pcaps").rglob("*") if p.suffix in (".pcap", ".trace"))
    if not caps:
        pytest.skip("no captures in ../shared/data/tcp-pcaps")
    for cap in caps:
        with_c = number_capture(cap, chunk=1 << 16)
        with monkeypatch.context() as m:
            m.setattr(_capture, "_records", None)
            assert number_capture(cap, chunk=1 << 16) == with_c, cap.name
        assert max(with_c[0], default=-1) + 1 == len(with_c[2])
