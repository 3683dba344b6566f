"""The classic-pcap record walk in C (collectors/_records.c) against the numpy/Python
record finder it replaces when built: the same records, the same damage reports, on real
captures and on seeded truncations and byte flips of them, across chunk boundaries."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from airlink.collectors import _capture
from airlink.collectors._capture import CaptureError, CaptureReader

from pcapcraft import link_wrap, pcap_bytes, tcp_packet

if _capture._records is None:
    pytest.skip("the C record walk is not built here (no C compiler when airlink was installed, "
                "or AIRLINK_PURE_PYTHON set); the numpy path is what runs", allow_module_level=True)

T0 = 1_700_000_000 * 10**9
BUNDLED = Path(__file__).resolve().parents[2] / "examples" / "data" / "pf-cell-host.pcap.gz"


def records(path, *, c_walk: bool, salvage: bool, chunk: int, monkeypatch):
    """Every record field the reader yields, then the problem (or the exception's text)."""
    monkeypatch.setattr(_capture, "_records", _capture._records if c_walk else None)
    reader = CaptureReader(path, salvage=salvage, chunk=chunk)
    cols = {k: [] for k in ("data_off", "caplen", "origlen", "ts_ns", "first", "bytes")}
    try:
        for b in reader:
            cols["data_off"].append(b.data_off - b.data_off[0])   # buffer layouts may differ
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
    for k in ("caplen", "origlen", "ts_ns", "bytes"):
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
