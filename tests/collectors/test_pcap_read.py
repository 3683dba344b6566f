"""read_pcap: every container, byte order, timestamp resolution and link type, checked
field by field against what was written; and against a dpkt decode of real captures."""
from __future__ import annotations

import numpy as np
import pytest

from airlink import collectors as C
from airlink.traces import validate

from tests.collectors.pcapcraft import gz, link_wrap, pcap_bytes, pcapng_bytes, tcp_packet, udp_packet

T0 = 1_700_000_000_123_456_789
TS_OPT = [("NOP", None), ("NOP", None), ("Timestamp", (111, 222))]


def packets():
    return [
        tcp_packet(flags="S", seq=100, options=[("MSS", 1400), ("SAckOK", b""), ("Timestamp", (5, 0)),
                                                ("NOP", None), ("WScale", 7)]),
        tcp_packet(src="10.0.0.2", dst="10.0.0.1", sport=80, dport=40000, flags="SA", seq=900,
                   ack=101, options=[("MSS", 1460), ("NOP", None), ("WScale", 3)]),
        tcp_packet(seq=101, ack=901, payload=b"x" * 300, options=TS_OPT),
        tcp_packet(src="10.0.0.2", dst="10.0.0.1", sport=80, dport=40000, seq=901, ack=401,
                   options=[("NOP", None), ("NOP", None), ("Timestamp", (7, 111)), ("NOP", None),
                            ("NOP", None), ("SAck", (1000, 2000))]),
        udp_packet(),
        tcp_packet(src="2001:db8::1", dst="2001:db8::2", v6=True, seq=5, payload=b"y" * 10),
    ]


def check_frame(df, n_expected=6):
    validate(df, "packets")
    assert len(df) == n_expected
    assert list(df["proto"]) == [6, 6, 6, 6, 17, 6][:n_expected]
    assert df["src"].astype(str).iloc[0] == "10.0.0.1"
    assert df["dst"].astype(str).iloc[1] == "10.0.0.1"
    assert df["seq"].iloc[2] == 101 and df["ack"].iloc[2] == 901
    assert df["payload_bytes"].iloc[2] == 300 and df["ip_len_bytes"].iloc[2] == 20 + 32 + 300
    assert df["tsval"].iloc[2] == 111 and df["tsecr"].iloc[2] == 222 and df["has_ts"].iloc[2]
    assert df["mss_bytes"].iloc[0] == 1400 and df["wscale"].iloc[0] == 7
    assert df["syn_options"].iloc[0] == 1 | 2 | 4
    assert df["wscale"].iloc[1] == 3 and df["syn_options"].iloc[1] == 4
    assert df["sack_blocks"].iloc[3] == 1 and not df["dsack"].iloc[3]
    assert df["tsval"].iloc[3] == 7
    assert df["sport"].iloc[4] == 5000 and df["payload_bytes"].iloc[4] == 10
    if n_expected > 5:
        assert df["src"].astype(str).iloc[5] == "2001:db8::1"
        assert df["payload_bytes"].iloc[5] == 10 and df["ip_len_bytes"].iloc[5] == 40 + 20 + 10
    assert (df["flow"].iloc[:4] == 0).all()
    assert list(df["direction"].iloc[:4]) == ["fwd", "rev", "fwd", "rev"]


@pytest.mark.parametrize("linktype,vlan", [(1, 0), (1, 1), (1, 2), (113, 0), (276, 0), (101, 0),
                                           (0, 0), (108, 0), (228, 0)])
@pytest.mark.parametrize("endian,nanos", [("<", False), (">", False), ("<", True), (">", True)])
def test_pcap_variants(tmp_path, linktype, vlan, endian, nanos):
    pk = packets() if linktype != 228 else packets()[:5]        # 228 = raw IPv4 only
    recs = [(T0 + i * 1_000_000, link_wrap(p, linktype, vlan=vlan)) for i, p in enumerate(pk)]
    f = tmp_path / "c.pcap"
    f.write_bytes(pcap_bytes(recs, linktype=linktype, endian=endian, nanos=nanos))
    df = C.read_pcap(f)
    check_frame(df, len(pk))
    t = df["time"].array.asi8
    want = T0 if nanos else T0 // 1000 * 1000
    assert t[0] == want and t[1] - t[0] == 1_000_000


def test_pcapng_interfaces_and_gzip(tmp_path):
    pk = packets()
    # two interfaces with different link types and timestamp resolutions (us, ns)
    recs = [(i % 2, T0 + i * 1_000_000, link_wrap(p, 1 if i % 2 == 0 else 113))
            for i, p in enumerate(pk)]
    data = pcapng_bytes([(1, None), (113, 9)], recs)
    f = tmp_path / "c.pcapng"
    f.write_bytes(data)
    df = C.read_pcap(f)
    check_frame(df)
    assert list(df["interface"]) == [0, 1, 0, 1, 0, 1]
    t = df["time"].array.asi8
    assert t[1] == T0 + 1_000_000 and t[0] == (T0 // 1000) * 1000
    g = tmp_path / "c.pcapng.gz"
    g.write_bytes(gz(data))
    assert C.read_pcap(g).equals(df)
    h = tmp_path / "c.pcap.gz"
    h.write_bytes(gz(pcap_bytes([(T0, link_wrap(p, 1)) for p in pk])))
    check_frame(C.read_pcap(h))


def test_pcapng_big_endian_and_simple_block(tmp_path):
    pk = packets()
    recs = [(0, T0 + i * 1000, link_wrap(p, 101)) for i, p in enumerate(pk)]
    f = tmp_path / "be.pcapng"
    f.write_bytes(pcapng_bytes([(101, None)], recs, endian=">", simple_first=True))
    df = C.read_pcap(f)
    check_frame(df)


def test_header_only_capture_keeps_true_sizes(tmp_path):
    """snaplen 64: payload sizes come from the IP header, timestamps missing when cut."""
    pk = [tcp_packet(seq=1 + 1000 * i, payload=b"z" * 1000, options=TS_OPT) for i in range(3)]
    f = tmp_path / "short.pcap"
    f.write_bytes(pcap_bytes([(T0 + i, link_wrap(p, 1), len(p) + 14) for i, p in enumerate(pk)],
                             snaplen=60))
    df = C.read_pcap(f)
    assert list(df["payload_bytes"]) == [1000] * 3
    assert list(df["captured_bytes"]) == [60] * 3
    assert not df["has_ts"].any()          # options cut at 60 bytes (14 + 20 + 20 + 6)


def test_many_records_fast_path_matches_walk(tmp_path):
    """The screened (vector) record finder and the record-by-record walk agree, also across
    chunk boundaries."""
    from airlink.collectors._capture import CaptureReader
    rng = np.random.default_rng(1)
    recs = []
    for i in range(1500):
        size = int(rng.integers(0, 1400))
        recs.append((T0 + i * 1000, link_wrap(tcp_packet(seq=i, payload=bytes(rng.integers(0, 255, size,
                                                                                          dtype=np.uint8))), 1)))
    f = tmp_path / "many.pcap"
    f.write_bytes(pcap_bytes(recs))
    big = C.read_pcap(f)
    assert len(big) == 1500 and (big["seq"].to_numpy() == np.arange(1500)).all()
    offs = []
    for b in CaptureReader(f, chunk=4099):
        offs.append(b.data_off.size)
    assert sum(offs) == 1500


def dpkt_fields(path):
    import dpkt
    rows = []
    with open(path, "rb") as fh:
        r = dpkt.pcap.Reader(fh)
        for ts, buf in r:
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            if not isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)):
                continue
            tcp = ip.data
            if isinstance(tcp, dpkt.tcp.TCP):
                rows.append((tcp.sport, tcp.dport, tcp.seq, tcp.ack, tcp.flags, tcp.win))
            else:
                rows.append(None)
    return rows


def real_captures(shared):
    return sorted((shared / "tcp-pcaps").rglob("*.pcap")) + sorted((shared / "tcp-pcaps").rglob("*.trace"))


def test_real_captures_agree_with_dpkt(shared_data):
    files = real_captures(shared_data)
    assert files
    for f in files:
        df = C.read_pcap(f)
        ref = dpkt_fields(f)
        assert len(df) == len(ref), f
        tcp = [r for r in ref if r is not None]
        ours = df[df["proto"] == 6]
        got = list(zip(ours["sport"].astype(int), ours["dport"].astype(int), ours["seq"].astype(int),
                       ours["ack"].astype(int), ours["flags"].astype(int), ours["window"].astype(int)))
        assert got == [tuple(int(x) for x in r) for r in tcp], f


def test_pcapng_runs_with_other_blocks(tmp_path):
    """Long runs of enhanced packet blocks (found in vector form) broken by other blocks
    (statistics, custom) and by a simple packet block still give every packet in order."""
    from tests.collectors.pcapcraft import _block
    t0 = T0 // 1000 * 1000                              # representable at microseconds too
    pk = [link_wrap(tcp_packet(seq=i, payload=bytes([i % 251]) * (i % 300)), 1) for i in range(400)]
    data = pcapng_bytes([(1, None), (1, 9)], [(i % 2, t0 + i * 1000, p) for i, p in enumerate(pk[:200])])
    data += _block(5, b"\x00" * 20)                     # interface statistics block
    data += _block(0x0BAD, b"custom" + b"\x06\x00\x00\x00" * 4)
    data += pcapng_bytes([(1, None), (1, 9)], [(i % 2, t0 + (200 + i) * 1000, p)
                                               for i, p in enumerate(pk[200:])])   # a second section
    f = tmp_path / "runs.pcapng"
    f.write_bytes(data)
    df = C.read_pcap(f)
    assert len(df) == 400
    assert (df["seq"].to_numpy() == np.arange(400)).all()
    assert (np.diff(df["time"].array.asi8) == 1000).all()
    assert list(df["payload_bytes"].iloc[:5]) == [0, 1, 2, 3, 4]


def read_ahead_threads():
    import threading
    return [t for t in threading.enumerate() if t.name == "airlink-capture-read"]


def test_read_ahead_batches_stay_whole_and_threads_end(tmp_path):
    """The file is read ahead on a thread: batches kept without ``reuse_buffer`` keep their
    bytes after later chunks are read (each record's payload equals what was written), a
    reader left after its first batch stops its thread, and ``reuse_buffer`` readers go
    round two buffers."""
    from airlink.collectors import _capture
    rng = np.random.default_rng(7)
    pays = [bytes(rng.integers(0, 255, int(rng.integers(0, 1400)), dtype=np.uint8)) for _ in range(800)]
    recs = [(T0 + i * 1000, link_wrap(tcp_packet(seq=i, payload=p), 1)) for i, p in enumerate(pays)]
    f = tmp_path / "many.pcap"
    f.write_bytes(pcap_bytes(recs))
    kept = list(_capture.CaptureReader(f, chunk=5000))
    frames = [bytes(b.buf[o:o + c]) for b in kept for o, c in zip(b.data_off.tolist(), b.caplen.tolist())]
    assert frames == [w for _, w in recs]
    reader = _capture.CaptureReader(f, chunk=5000)
    it = iter(reader)
    next(it)
    assert len(read_ahead_threads()) == 1
    it.close()                              # the consumer leaves: the generator's finally
    assert read_ahead_threads() == []
    seen = set()
    real = _capture._ReadAhead.get

    def get(self):
        out = real(self)
        if out[0] is not None:
            seen.add(id(out[0]))
        return out
    _capture._ReadAhead.get = get
    try:
        n = sum(len(b.data_off) for b in _capture.CaptureReader(f, chunk=5000, reuse_buffer=True))
    finally:
        _capture._ReadAhead.get = real
    assert n == 800 and len(seen) == 2
    assert read_ahead_threads() == []


def test_read_error_mid_file_reported_in_order(tmp_path, monkeypatch):
    """A read that fails part-way (an I/O error on a damaged disk) is reported after the
    records read before it, at the byte where the read stopped; ``salvage`` keeps them."""
    from airlink.collectors import _capture
    recs = [(T0 + i * 1000, link_wrap(tcp_packet(seq=i, payload=b"z" * 1000), 1)) for i in range(100)]
    data = pcap_bytes(recs)
    f = tmp_path / "bad-disk.pcap"
    f.write_bytes(data)
    fail_at = 24 + 30 * (16 + len(recs[0][1])) + 5         # inside record 31's header

    class FailingFile:
        def __init__(self, path):
            self.f, self.pos = open(path, "rb"), 0

        def read(self, n):
            b = self.f.read(n)
            self.pos += len(b)
            return b

        def readinto(self, view):
            if self.pos >= fail_at:
                raise OSError(5, "Input/output error")
            k = self.f.readinto(view[:fail_at - self.pos])
            self.pos += k
            return k

        def close(self):
            self.f.close()
    monkeypatch.setattr(_capture, "_open", lambda path: (FailingFile(path), False))
    with pytest.raises(_capture.CaptureError) as err:
        list(_capture.CaptureReader(f, chunk=4096))
    assert "Input/output error" in str(err.value)
    assert err.value.packets_read <= 30 and err.value.offset == fail_at     # the byte the read reached
    got = [s for b in _capture.CaptureReader(f, chunk=4096, salvage=True)
           for s in b.ts_ns.tolist()]
    assert got == [t // 1000 * 1000 for t, _ in recs[:30]]       # microsecond pcap
    assert read_ahead_threads() == []


@pytest.mark.parametrize("linktype", [1, 113, 0])
@pytest.mark.parametrize("compiled", [True, False])
def test_link_family_and_version_nibble_as_wireshark_reads_them(tmp_path, monkeypatch, linktype, compiled):
    """A link layer that says IPv4 over an IPv6 packet: Wireshark reads the packet by its
    version (IPv6); one that says IPv6 over an IPv4 packet: Wireshark's IPv6 dissector
    calls it bogus and reads nothing. Both decoders follow; tshark, where installed, agrees
    record by record."""
    import shutil
    import struct
    import subprocess
    from airlink.collectors import _capture
    if not compiled:
        monkeypatch.setattr(_capture, "_records", None)
    v4 = tcp_packet(src="10.0.0.1", dst="10.0.0.2", seq=1, flags="S")
    v6 = tcp_packet(src="2001:db8::1", dst="2001:db8::2", seq=1, flags="S", v6=True)

    def claimed(ip, family):          # ``ip`` behind a link header that says ``family``
        other = link_wrap(v6 if family == 6 else v4, linktype)
        head = other[:len(other) - len(v6 if family == 6 else v4)]
        return head + ip
    frames = [claimed(v4, 4), claimed(v4 + bytes(40), 6), claimed(v6, 4), claimed(v6, 6)]
    f = tmp_path / "claims.pcap"
    f.write_bytes(pcap_bytes([(T0 + i * 1000, fr) for i, fr in enumerate(frames)], linktype=linktype))
    got = C.read_pcap(f)
    assert list(got["src"].astype(str)) == ["10.0.0.1", "2001:db8::1", "2001:db8::1"]
    assert list(got["proto"]) == [6, 6, 6]
    if shutil.which("tshark"):
        out = subprocess.run(["tshark", "-r", str(f), "-T", "fields", "-e", "ip.src", "-e", "ipv6.src"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        assert [r.replace("\t", "") for r in out] == ["10.0.0.1", "", "2001:db8::1", "2001:db8::1"]
