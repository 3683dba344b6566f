"""A capture's census (collectors/_tcpinput.read_columns(census=True), what analysing a
capture a group of flows at a time starts from): the C pass (collectors/_census.c) and its
numpy twin give the same counts and firsts/lasts, and those are the ones the definition
gives - least / greatest (time, packet index) - on a capture whose records are out of time
order with equal times."""
from __future__ import annotations

import numpy as np
import pytest
from tests.cext import c_records
from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet

from airlink.collectors import _capture
from airlink.collectors._tcpinput import read_columns

ARRAYS = ("flow_packets", "flow_first_ts", "flow_first_index", "flow_first_swap", "flow_syn_swap",
          "flow_syn_ts", "flow_last_ts", "side_packets", "side_bytes", "side_first", "side_syn",
          "side_ack", "side_ws", "side_mss", "flow_lo", "flow_hi", "flow_proto")


def census(path, monkeypatch, *, c: bool):
    with monkeypatch.context() as m:
        if not c:
            m.setattr(_capture, "_records", None)
        r = read_columns(path, census=True, progress=False)
    with r.pop("ts_file") as f:
        f.seek(0)
        r["times"] = np.fromfile(f, np.int64)
    return r


def assert_same(a, b, name):
    for k in (*ARRAYS, "times"):
        np.testing.assert_array_equal(a[k], b[k], err_msg=f"{name}: {k}")
    assert (a["lateness_ns"], a["ip_packets"], a["v6_addresses"]) == \
        (b["lateness_ns"], b["ip_packets"], b["v6_addresses"]), name


@pytest.fixture
def c_built():
    c_records("census_add")


def test_census_by_definition(c_built, monkeypatch, tmp_path):
    # one connection, records out of time order, two pairs with equal times
    A, B = ("10.0.0.1", 40000), ("10.0.0.2", 80)
    rows = [  # (time ns, sender is A, flags, seq, options)
        (5_000, True, "A", 101, ()), (1_000, True, "S", 100, [("MSS", 1400), ("WScale", 7)]),
        (2_000, False, "SA", 900, [("MSS", 1300), ("WScale", 3)]), (2_000, True, "A", 101, ()),
        (1_000, True, "S", 100, [("MSS", 1460)]), (7_000, False, "A", 901, ()), (7_000, True, "A", 102, ())]
    frames = []
    for t, from_a, flags, seq, opts in rows:
        (s, sp), (d, dp) = (A, B) if from_a else (B, A)
        frames.append((10**9 + t, link_wrap(tcp_packet(s, d, sp, dp, seq=seq, flags=flags, options=opts), 1)))
    f = tmp_path / "ooo.pcap"
    f.write_bytes(pcap_bytes(frames, nanos=True))
    c = census(f, monkeypatch, c=True)
    assert_same(c, census(f, monkeypatch, c=False), "ooo.pcap")
    # A is the low endpoint (10.0.0.1 < 10.0.0.2): swap 0 is A's side
    assert c["flow_packets"].tolist() == [7]
    assert (c["flow_first_ts"][0], c["flow_first_index"][0]) == (10**9 + 1_000, 1)   # the earlier of the equal SYNs
    assert c["flow_last_ts"][0] == 10**9 + 7_000
    assert (c["flow_syn_swap"][0], c["flow_first_swap"][0]) == (0, 0)
    assert c["side_packets"].tolist() == [5, 2]
    assert c["side_first"].tolist() == [100, 900]            # seq of each side's first packet
    assert c["side_syn"].tolist() == [100, 900]
    assert c["side_ack"].tolist() == [10**9 + 2_000, 10**9 + 7_000]   # first plain ACK's time per side
    # the last SYN announcing it: A's window scale only in its first SYN; both announce an
    # MSS at time 1000, the later in the file (index 4) wins
    assert c["side_ws"].tolist() == [7, 3]
    assert c["side_mss"].tolist() == [1460, 1300]
    assert c["lateness_ns"] == 4_000


def test_census_c_and_numpy_agree_on_real_captures(c_built, shared_data, monkeypatch):
    caps = sorted(p for p in (shared_data / "tcp-pcaps").rglob("*") if p.suffix in (".pcap", ".trace"))
    if not caps:
        pytest.skip("no captures in ../shared/data/tcp-pcaps")
    for cap in caps:
        assert_same(census(cap, monkeypatch, c=True), census(cap, monkeypatch, c=False), cap.name)


def test_a_flow_groups_read_reserves_the_census_count(monkeypatch, shared_data):
    """``read_columns(keep=..., size=n)`` (a flow group read again after the census) reserves
    the ``n`` packets the census counted for those flows - not one row per byte of the file,
    whose reservation a 3 GB capture's group could not get - and reads exactly them."""
    from airlink.collectors import _tcpinput
    path = min((shared_data / "tcp-pcaps").rglob("*.pcap*"), key=lambda p: abs(p.stat().st_size - 200_000))
    cen = read_columns(path, census=True, progress=False)
    cen.pop("ts_file").close()
    counts = cen["flow_packets"]
    keep = np.zeros(len(counts), bool)
    keep[np.argsort(counts)[-1:]] = True                       # the busiest flow
    want = int(counts[keep].sum())
    reserved = []
    real = _tcpinput._ColumnStore.reserve
    monkeypatch.setattr(_tcpinput._ColumnStore, "reserve", lambda self, n: (reserved.append(n), real(self, n))[1])
    r = read_columns(path, keep=keep, size=want, progress=False)
    assert len(r["ts_ns"]) == want
    assert reserved and max(reserved) == want
