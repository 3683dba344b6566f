"""Salvage in compressed captures: a cut or corrupt .pcap.gz keeps every packet before the
damage, as many as tshark reads from it."""
from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
import zlib

import pytest

from airlink import collectors as C
from airlink.collectors._capture import CaptureError

from tests.collectors.pcapcraft import link_wrap, pcap_bytes, pcapng_bytes, tcp_packet

REAL = ["zeek-head/ssh.pcap", "zeek-head/206_example_b.pcap", "zeek-head/timestamp.pcap"]
CUTS = [0.02, 0.1, 0.37, 0.5, 0.83, 0.999]


def complete_records(pcap: bytes) -> int:
    """Records wholly inside an uncompressed little-endian pcap prefix (by hand)."""
    off, n = 24, 0
    while off + 16 <= len(pcap):
        cap = struct.unpack("<I", pcap[off + 8:off + 12])[0]
        if off + 16 + cap > len(pcap):
            break
        off += 16 + cap
        n += 1
    return n


def tshark_count(path):
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True).stdout
    return len(out.split())


@pytest.mark.parametrize("name", REAL)
def test_cut_gzip_keeps_the_prefix(shared_data, tmp_path, name):
    raw = (shared_data / "tcp-pcaps" / name).read_bytes()
    data = gzip.compress(raw)
    for frac in CUTS:
        cut = data[: int(len(data) * frac)]
        f = tmp_path / "cut.pcap.gz"
        f.write_bytes(cut)
        # independent: one zlib call decodes all it can of a cut stream; count its records
        expect = complete_records(zlib.decompressobj(31).decompress(cut))
        assert expect > 0 or frac < 0.05
        pk = C.read_pcap(f, salvage=True)
        assert len(pk) == expect, (name, frac)
        assert "compressed stream cut short" in pk.attrs["problem"]
        assert f"{expect} packets read" in pk.attrs["problem"]
        if shutil.which("tshark"):
            assert tshark_count(f) == expect, (name, frac)
        # the path analysis salvages the same packets
        a = C.analyze_tcp(f, salvage=True)
        assert a.attrs["packets"] == expect
        with pytest.raises(CaptureError) as e:
            C.read_pcap(f)
        assert f"{expect} packets read" in str(e.value) and str(f) in str(e.value)


def _records(n):
    T0 = 1_700_000_000 * 10**9
    return [(T0 + i * 10**6, link_wrap(tcp_packet(seq=1 + 100 * i, flags="PA", payload=bytes([i % 251]) * 100), 1))
            for i in range(n)]


def test_corrupt_deflate_block_keeps_what_precedes_it(tmp_path):
    """Two deflate blocks, the first ending (full flush) after exactly 300 records; the
    second block's header is made invalid (block type 3). Truth: the 300 records."""
    body = pcap_bytes(_records(700))
    head_len = 24 + sum(16 + len(b) for _, b in _records(700)[:300])
    co = zlib.compressobj(6, zlib.DEFLATED, 31)
    first = co.compress(body[:head_len]) + co.flush(zlib.Z_FULL_FLUSH)
    second = co.compress(body[head_len:]) + co.flush()
    second = bytes([0x06]) + second[1:]               # BFINAL 0, BTYPE 11: "invalid block type"
    f = tmp_path / "corrupt.pcap.gz"
    f.write_bytes(first + second)
    pk = C.read_pcap(f, salvage=True)
    assert len(pk) == 300
    assert "invalid block type" in pk.attrs["problem"]
    assert f"at compressed byte {len(first)}" in pk.attrs["problem"]
    if shutil.which("tshark"):
        assert tshark_count(f) == 300
    with pytest.raises(CaptureError, match="300 packets read"):
        C.read_pcap(f)


def test_multi_member_and_padded_gzip_read_whole(tmp_path):
    """Concatenated gzip members (gzip's format allows them) and trailing zero padding are
    not damage; trailing garbage is."""
    recs = _records(50)
    body = pcap_bytes(recs)
    half = 24 + sum(16 + len(b) for _, b in recs[:20])
    f = tmp_path / "m.pcap.gz"
    f.write_bytes(gzip.compress(body[:half]) + gzip.compress(body[half:]) + b"\0" * 10)
    pk = C.read_pcap(f)
    assert len(pk) == 50 and "problem" not in pk.attrs
    g = tmp_path / "g.pcap.gz"
    g.write_bytes(gzip.compress(body) + b"garbage!")
    with pytest.raises(CaptureError, match="trailing bytes that are not gzip data"):
        C.read_pcap(g)
    assert len(C.read_pcap(g, salvage=True)) == 50


def test_cut_pcapng_gzip(tmp_path):
    recs = _records(400)
    body = pcapng_bytes([(1, 9)], [(0, t, p) for t, p in recs])
    data = gzip.compress(body)
    f = tmp_path / "c.pcapng.gz"
    f.write_bytes(data[: len(data) // 2])
    pk = C.read_pcap(f, salvage=True)
    # by hand: the blocks wholly inside the decodable prefix (every EPB has the same size)
    prefix = zlib.decompressobj(31).decompress(data[: len(data) // 2])
    shb_idb = len(pcapng_bytes([(1, 9)], []))
    epb = (len(body) - shb_idb) // 400
    assert len(pk) == (len(prefix) - shb_idb) // epb > 0
    assert "compressed stream cut short" in pk.attrs["problem"]


def _decoded(path, fast):
    """Every byte a GzipStream gives and its damage (message, compressed offset) or None."""
    from airlink.collectors._capture import GzipDamage, GzipStream
    s, out = GzipStream(path, fast=fast), bytearray()
    buf = memoryview(bytearray(1 << 15))
    try:
        while True:
            k = s.readinto(buf)
            if not k:
                return bytes(out), None
            out += buf[:k]
    except GzipDamage as d:
        return bytes(out), (str(d), d.compressed_offset)
    finally:
        s.close()


def test_isal_inflate_gives_zlibs_bytes_and_damage(shared_data, tmp_path):
    """The fast decoder (ISA-L) against the reference (zlib) on a real capture, gzipped in
    two members, intact and damaged in every way the reader tells apart: cut, flipped
    bytes in either member, a bad CRC or length trailer, trailing garbage. Same bytes, same
    damage message and offset; the intact stream's bytes are the capture's."""
    from airlink.collectors import _capture
    if _capture._isal_zlib is None:
        pytest.skip("isal (ISA-L's inflate) is not installed: only zlib decodes here")
    raw = (shared_data / "tcp-pcaps" / "zeek-head" / "206_example_b.pcap").read_bytes()
    one, two = gzip.compress(raw[:len(raw) // 3]), gzip.compress(raw[len(raw) // 3:])
    whole = one + two
    cases = {"intact": whole, "garbage": whole + b"not gzip", "crc": whole[:-8] + b"\0\0\0\0" + whole[-4:],
             "isize": whole[:-1] + bytes([whole[-1] ^ 1])}
    for frac in (0.01, 0.3, 0.5, 0.7, 0.999):
        cases[f"cut {frac}"] = whole[:int(len(whole) * frac)]
        at = int(len(whole) * frac)
        cases[f"flip {frac}"] = whole[:at] + bytes([whole[at] ^ 0x5A]) + whole[at + 1:]
    for name, data in cases.items():
        f = tmp_path / "c.pcap.gz"
        f.write_bytes(data)
        fast, ref = _decoded(f, True), _decoded(f, False)
        assert fast == ref, name
        if name == "intact":
            assert ref == (raw, None)
        else:
            assert ref[1] is not None or name.startswith("flip"), name    # a flip can decode as other data
