"""The capture reader's loops in C (collectors/_records.c) against the numpy/Python code
they replace when built: the record walk gives the same records and the same damage
reports, and the header decoder the same fields, on real captures, crafted packets of
every link type and layout, and seeded truncations and byte flips of both."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from airlink.collectors import _capture, _decode
from airlink.collectors._capture import CaptureError, CaptureReader

from tests.cext import c_extension, c_tcploops
from tests.collectors.pcapcraft import gtpu_packet, link_wrap, pcap_bytes, tcp_packet, udp_packet

c_extension("airlink.collectors._records", "walk", "decode", module_level=True)

T0 = 1_700_000_000 * 10**9
BUNDLED = Path(__file__).resolve().parents[2] / "examples" / "data" / "pf-cell-host.pcap.gz"


def records(path, *, c_walk: bool, salvage: bool, chunk: int, monkeypatch):
    """Every record field the reader yields, then the problem (or the exception's text)."""
    monkeypatch.setattr(_capture, "_records", _capture._records if c_walk else None)
    reader = CaptureReader(path, salvage=salvage, chunk=chunk)
    cols = {k: [] for k in ("data_off", "caplen", "origlen", "ts_ns", "first", "bytes")}
    try:
        for b in reader:
            cols["data_off"].append(b.data_off)      # both fill the chunk buffers alike
            cols["caplen"].append(b.caplen)
            cols["origlen"].append(b.origlen)
            cols["ts_ns"].append(b.ts_ns)
            cols["first"].append(np.array([b.first_packet]))
            cols["bytes"].append(                                    # the packet bytes
                np.array([hash(bytes(b.buf[o:o + c])) for o, c in zip(b.data_off, b.caplen)]))
        end = reader.problem
    except CaptureError as exc:
        end = (str(exc), exc.offset, exc.packet, exc.packets_read)
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}, end


def assert_same(path, monkeypatch, **kw):
    c, c_end = records(path, c_walk=True, monkeypatch=monkeypatch, **kw)
    p, p_end = records(path, c_walk=False, monkeypatch=monkeypatch, **kw)
    assert c_end == p_end
    for k in c:
        assert np.array_equal(c[k], p[k]), k
    return c, c_end


def real_captures(shared_data):
    return sorted(p for p in (shared_data / "tcp-pcaps").rglob("*")
                  if p.is_file() and p.read_bytes()[:4] in _capture.PCAP_MAGICS)


def test_real_captures_same_records(shared_data, monkeypatch):
    """The shared real captures and the bundled example's own capture (gzip)."""
    paths = real_captures(shared_data) + [BUNDLED]
    assert BUNDLED.exists()
    total = 0
    for path in paths:
        for chunk in (_capture.CHUNK, 65536, 4099):
            got, end = assert_same(path, monkeypatch, salvage=False, chunk=chunk)
            assert end is None
        total += len(got["ts_ns"])
    assert total > 20_000


def test_damaged_real_captures_same_report(shared_data, monkeypatch, tmp_path):
    """Seeded truncations, byte flips and impossible lengths/fractions: the C walk fails
    where the Python walk fails, with the same message, offset and packet number, and
    salvage keeps the same records."""
    rng = np.random.default_rng(7)
    paths = real_captures(shared_data)
    cases = 0
    for path in paths[:6]:
        data = bytearray(path.read_bytes())
        for trial in range(6):
            d = bytearray(data)
            kind = trial % 3
            if kind == 0:
                d = d[:int(rng.integers(24, len(d)))]
            elif kind == 1:
                for _ in range(int(rng.integers(1, 8))):
                    d[int(rng.integers(24, len(d)))] = int(rng.integers(0, 256))
            else:                                   # a record header's length or fraction
                first_cap = int.from_bytes(d[32:36], "little" if d[0] == 0xD4 or d[0] == 0x4D else "big")
                at = 24 + 16 + first_cap            # the second record's header
                if at + 16 <= len(d):
                    field = 8 if trial % 2 else 4
                    d[at + field:at + field + 4] = b"\xff\xff\xff\x7f"
            f = tmp_path / f"{path.stem}-{trial}.pcap"
            f.write_bytes(bytes(d))
            for salvage in (False, True):
                assert_same(f, monkeypatch, salvage=salvage, chunk=65536)
                cases += 1
    assert cases >= 24


def test_crafted_chunk_boundaries(monkeypatch, tmp_path):
    """Records of every size from 0 to 1400 bytes, read in chunks that cut through headers
    and packets everywhere, both byte orders."""
    rng = np.random.default_rng(3)
    recs = [(T0 + i * 1000, link_wrap(tcp_packet(seq=i, payload=bytes(rng.integers(
        0, 255, int(rng.integers(0, 1400)), dtype=np.uint8))), 1)) for i in range(800)]
    f = tmp_path / "le.pcap"
    f.write_bytes(pcap_bytes(recs))
    raw = f.read_bytes()
    # the same capture in big-endian byte order
    out = bytearray(raw[:24])
    out[0:4] = b"\xa1\xb2\xc3\xd4"
    for fmt_at, width in ((4, 2), (6, 2), (8, 4), (12, 4), (16, 4), (20, 4)):
        out[fmt_at:fmt_at + width] = raw[fmt_at:fmt_at + width][::-1]
    p = 24
    while p < len(raw):
        hdr = raw[p:p + 16]
        cap = int.from_bytes(hdr[8:12], "little")
        out += b"".join(hdr[k:k + 4][::-1] for k in range(0, 16, 4)) + raw[p + 16:p + 16 + cap]
        p += 16 + cap
    g = tmp_path / "be.pcap"
    g.write_bytes(bytes(out))
    for path in (f, g):
        for chunk in (4099, 1501, 777):
            got, end = assert_same(path, monkeypatch, salvage=False, chunk=chunk)
            assert end is None and len(got["ts_ns"]) == 800
            assert np.array_equal(got["ts_ns"], T0 + np.arange(800) * 1000)


# ---- header decoder -------------------------------------------------------------------

def decoded_both(path, monkeypatch, chunk=1 << 20):
    """Every batch of ``path`` decoded by the C loop and by the numpy decoder (both address
    forms); asserts they are equal, key by key, dtype and value. Returns packets decoded."""
    c_loops = _capture._records
    n = 0
    for batch in CaptureReader(path, chunk=chunk, salvage=True):
        for raw in (False, True):
            monkeypatch.setattr(_capture, "_records", c_loops)
            a = _decode.decode(batch, raw_addresses=raw)
            monkeypatch.setattr(_capture, "_records", None)
            b = _decode.decode(batch, raw_addresses=raw)
            assert set(a) == set(b)
            for k in a:
                if k == "addr_table":
                    assert all(np.array_equal(x, y) for x, y in zip(a[k], b[k]))
                elif k == "unknown_linktypes":
                    assert a[k] == b[k]
                else:
                    assert a[k].dtype == b[k].dtype, k
                    bad = np.flatnonzero(a[k] != b[k])[:5]
                    assert len(bad) == 0, (path.name, k, a["keep"][bad], a[k][bad], b[k][bad])
        n += len(a["keep"])
    monkeypatch.setattr(_capture, "_records", c_loops)
    return n


def crafted_packets(rng):
    """IPv4/IPv6 TCP with every option layout the decoder reads (NOP NOP TS, TS first,
    TS + SACK, DSACK, SYN options, odd orders, truncated lists), UDP, IPv6 extension
    headers and fragments, IPv4 fragments, other protocols, packets in GTP-U tunnels."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
    opts = [
        [("NOP", None), ("NOP", None), ("Timestamp", (111, 222))],
        [("Timestamp", (5, 6))],
        [("NOP", None), ("NOP", None), ("Timestamp", (7, 8)), ("NOP", None), ("NOP", None),
         ("SAck", (3000, 4000))],
        [("NOP", None), ("NOP", None), ("Timestamp", (7, 8)), ("NOP", None), ("NOP", None),
         ("SAck", (500, 900, 400, 1200))],
        [("NOP", None), ("NOP", None), ("SAck", (100, 200, 300, 400, 500, 600))],
        [("MSS", 1400), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)],
        [("MSS", 1460), ("NOP", None), ("WScale", 15)],
        [("WScale", 3), ("MSS", 536), ("EOL", None)],
        [("NOP", None), ("NOP", None), ("Timestamp", (9, 9)), ("MSS", 1200)],
    ]
    out = []
    for i in range(240):
        v6 = i % 3 == 0
        o = opts[i % len(opts)]
        flags = "S" if i % 7 == 0 else "SA" if i % 11 == 0 else "A"
        pay = bytes(rng.integers(0, 256, int(rng.integers(0, 60)), dtype=np.uint8))
        out.append(tcp_packet(src="2001:db8::1" if v6 else "10.0.0.1",
                              dst="2001:db8::2" if v6 else "10.0.0.2", seq=int(rng.integers(0, 2**32)),
                              ack=int(rng.integers(0, 2**32)) if i % 5 else 1000, flags=flags,
                              options=o, payload=pay, v6=v6))
    out.append(udp_packet())
    ip6 = IPv6(src="2001:db8::1", dst="2001:db8::2")
    out += [bytes(ip6 / IPv6ExtHdrHopByHop() / TCP(sport=1, dport=2, seq=9) / b"abc"),
            bytes(ip6 / IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop() / TCP(sport=1, dport=2) / b"x"),
            bytes(ip6 / IPv6ExtHdrFragment(offset=0, m=1) / TCP(sport=3, dport=4) / (b"y" * 30)),
            bytes(ip6 / IPv6ExtHdrFragment(offset=5) / (b"z" * 16)),
            bytes(IP(src="1.2.3.4", dst="5.6.7.8", frag=3) / (b"q" * 20)),
            bytes(IP(src="1.2.3.4", dst="5.6.7.8", proto=47) / (b"g" * 20)),
            bytes(IP(src="1.2.3.4", dst="5.6.7.8", ihl=4) / (b"h" * 30))]
    # GTP-U tunnels: every header layout (optional fields, the 5G extension), either outer
    # and inner family, an echo request (not a G-PDU) and a UDP 2152 packet of other bytes
    inner = out[:12]
    out += [gtpu_packet(p, seq=k if k % 3 == 1 else None, pdu_session=k if k % 3 == 2 else None,
                        outer_v6=k % 4 == 3) for k, p in enumerate(inner)]
    out += [gtpu_packet(b"", message=1), udp_packet(sport=2152, dport=2152, payload=bytes(range(40)))]
    return out


@pytest.mark.parametrize("linktype,vlan", [(1, 0), (1, 2), (113, 0), (276, 0), (101, 0), (0, 0),
                                           (108, 0)])
def test_decoder_same_fields_crafted(linktype, vlan, monkeypatch, tmp_path):
    """Every layout, full and cut by a small snaplen (options and headers cut anywhere),
    and with random byte flips in the packets."""
    rng = np.random.default_rng(linktype + vlan)
    frames = [link_wrap(p, linktype, vlan=vlan) for p in crafted_packets(rng)]
    for snaplen in (65535, 96, 60, 41):
        f = tmp_path / f"c{snaplen}.pcap"
        f.write_bytes(pcap_bytes([(T0 + i * 1000, fr) for i, fr in enumerate(frames)],
                                 linktype=linktype, snaplen=snaplen))
        assert decoded_both(f, monkeypatch) > (100 if snaplen > 41 else -1)
    for trial in range(20):
        flipped = []
        for fr in frames:
            b = np.frombuffer(fr, np.uint8).copy()
            k = int(rng.integers(0, 4))
            b[rng.integers(0, len(b), k)] = rng.integers(0, 256, k)
            flipped.append(b.tobytes())
        f = tmp_path / f"flip{trial}.pcap"
        f.write_bytes(pcap_bytes([(T0 + i * 1000, fr) for i, fr in enumerate(flipped)],
                                 linktype=linktype))
        decoded_both(f, monkeypatch)


def test_decoder_same_fields_real_and_fuzzed(shared_data, monkeypatch, tmp_path):
    paths = real_captures(shared_data)
    assert sum(decoded_both(p, monkeypatch) for p in paths + [BUNDLED]) > 20_000
    rng = np.random.default_rng(11)
    for path in paths:
        data = np.frombuffer(path.read_bytes(), np.uint8)
        for trial in range(4):
            d = data.copy()
            k = max(1, len(d) // 300)
            d[rng.integers(24, len(d), k)] = rng.integers(0, 256, k)
            f = tmp_path / f"{path.stem}-{trial}.pcap"
            f.write_bytes(d.tobytes())
            decoded_both(f, monkeypatch, chunk=int(rng.choice([4099, 65536, 1 << 20])))


def test_tcp_analysis_same_with_c_loops(shared_data, monkeypatch):
    """The whole analysis of real captures is the same with the C loops (unwrapping,
    running maxima) as with numpy."""
    import pandas as pd

    import airlink.collectors._tcparrays as arrays
    loops = c_tcploops("unwrap", "cummax")
    from airlink import collectors as C
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + \
        sorted((shared_data / "tcp-pcaps").rglob("*.trace"))[:6]
    assert files
    echoes = 0
    for f in files:
        monkeypatch.setattr(arrays, "_tcploops", loops)
        a = C.analyze_tcp(f, resolution="100ms")
        monkeypatch.setattr(arrays, "_tcploops", None)
        b = C.analyze_tcp(f, resolution="100ms")
        for k in ("flows", "series", "events"):
            pd.testing.assert_frame_equal(getattr(a, k), getattr(b, k), check_exact=True, obj=f"{f.name} {k}")
        echoes += int(((a.events["event"] == "rtt") & (a.events["kind"] == "timestamp")).sum())
    assert echoes > 500          # ssh.pcap, timestamp.pcap, comp005.trace time by echoes


def test_unwrap_and_cummax_same_in_c(monkeypatch):
    """The C unwrap and running maximum against their numpy forms on seeded random groups:
    steps across 2**31 both ways, wrapping past 2**32, values below -1, one group and many
    (the numpy running maximum has two forms: slices for <= 256 groups, offsets beyond)."""
    import airlink.collectors._tcparrays as arrays
    loops = c_tcploops("unwrap", "cummax")
    rng = np.random.default_rng(5)
    for trial in range(300):
        m = int(rng.integers(1, 2000))
        ng = int(rng.choice([1, 3, 300]))
        groups = np.sort(rng.integers(0, ng, m)).astype(np.int32)
        base = rng.integers(0, 2**32, ng).astype(np.int64)
        raw = (base[groups] + np.cumsum(rng.integers(-2**31 + 1, 2**31, m) // rng.choice([1, 1000, 10**6]))) % 2**32
        raw = raw.astype(np.uint32)
        values = rng.integers(-3, 10**12, m).astype(np.int64)
        valid = rng.random(m) < 0.7
        starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        monkeypatch.setattr(arrays, "_tcploops", loops)
        got = arrays._unwrap(raw, groups, base), arrays._grouped_cummax(values, groups, valid, starts)
        monkeypatch.setattr(arrays, "_tcploops", None)
        ref = arrays._unwrap(raw, groups, base), arrays._grouped_cummax(values, groups, valid, starts)
        for x, y in zip(got, ref):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
