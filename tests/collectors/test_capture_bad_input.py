"""Damaged captures: one clear line naming file, byte offset and packet number; --salvage
keeps the good part; a seeded fuzz run (truncations and byte flips of real captures) finds
no crash."""
from __future__ import annotations

import numpy as np
import pytest

from airlink import collectors as C
from airlink.core.errors import AirlinkError

from tests.errorline import one_error_line
from tests.collectors.pcapcraft import link_wrap, pcap_bytes, pcapng_bytes, tcp_packet

T0 = 1_700_000_000 * 10**9
R = 16 + 14 + 20 + 20 + 100          # bytes per record of good_capture()


def good_capture(n=50):
    return pcap_bytes([(T0 + i * 10**6, link_wrap(tcp_packet(seq=1 + 100 * i, payload=b"p" * 100), 1))
                       for i in range(n)])


@pytest.mark.parametrize("mutate,expect", [
    (lambda d: d[: 24 + 3 * R + 10], "truncated record header at byte 534 (packet 4); 3 packets read"),
    (lambda d: d[: 24 + 3 * R + 40], "truncated record (24 of 154 captured bytes present) at byte 534 "
                                       "(packet 4); 3 packets read"),
    (lambda d: b"", "empty file"),
    (lambda d: b"\x00\x11\x22\x33" + d[4:], "wrong magic 00112233 at byte 0 (packet 1)"),
    (lambda d: d[:24 + R + 8] + (10**7).to_bytes(4, "little") + d[24 + R + 12:],
     "impossible captured length 10000000 (snaplen 65535) at byte 194 (packet 2); 1 packets read"),
    (lambda d: d[:20] + (147).to_bytes(4, "little") + d[24:], "unknown link type 147"),
    (lambda d: d[:10], "truncated pcap file header"),
])
def test_one_clear_line(tmp_path, run_airlink, mutate, expect):
    f = tmp_path / "bad.pcap"
    f.write_bytes(mutate(good_capture()))
    status, out, err = run_airlink("collect", f, "-o", tmp_path / "out")
    assert status == 2
    line = one_error_line(err)
    assert str(f) in line and expect in line


def test_salvage_keeps_good_part(tmp_path, run_airlink):
    f = tmp_path / "cut.pcap"
    f.write_bytes(good_capture()[: 24 + 30 * R + 20])
    with pytest.raises(C.CaptureError) as exc:
        C.read_pcap(f)
    assert exc.value.packet == 31 and exc.value.packets_read == 30
    pk = C.read_pcap(f, salvage=True)
    assert len(pk) == 30 and "packet 31" in pk.attrs["problem"]
    status, out, err = run_airlink("collect", f, "-o", tmp_path / "out", "--salvage", "--json")
    assert status == 0 and "30 packets read" in err
    assert '"packets": 30' in out


def test_pcapng_damage(tmp_path):
    data = pcapng_bytes([(1, None)], [(0, T0 + i, link_wrap(tcp_packet(seq=i), 1)) for i in range(5)])
    f = tmp_path / "cut.pcapng"
    f.write_bytes(data[:-30])
    with pytest.raises(C.CaptureError, match=r"truncated block at byte \d+ \(packet 5\); 4 packets read"):
        C.read_pcap(f)
    assert len(C.read_pcap(f, salvage=True)) == 4


def test_sniffing_names_every_reader(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(b"\x01\x02garbage")
    with pytest.raises(AirlinkError) as exc:
        C.read(f)
    msg = str(exc.value)
    for name in C.READERS:
        assert name in msg


def _mutations(data: bytes, rng, count):
    for _ in range(count):
        d = bytearray(data)
        kind = rng.integers(0, 3)
        if kind == 0:
            d = d[: int(rng.integers(0, len(d)))]
        else:
            for _ in range(int(rng.integers(1, 20))):
                d[int(rng.integers(0, len(d)))] = int(rng.integers(0, 256))
            if kind == 2:
                d = d[: int(rng.integers(len(d) // 2, len(d) + 1))]
        yield bytes(d)


def test_fuzz_no_crash(tmp_path, shared_data):
    """Seeded, fixed number of cases (bounded time): every outcome is a frame or an
    AirlinkError, never another exception."""
    rng = np.random.default_rng(20261122)
    sources = [shared_data / "tcp-pcaps/zeek-head/timestamp.pcap",
               shared_data / "tcp-pcaps/tcprs/rto/rto001.trace",
               shared_data / "tcp-pcaps/zeek-head/option-sack.pcap"]
    ng = pcapng_bytes([(1, None), (113, 9)], [(i % 2, T0 + i * 1000, link_wrap(
        tcp_packet(seq=i * 10, payload=b"q" * 20, options=[("NOP", None), ("NOP", None),
                                                           ("Timestamp", (i, i))]), 1 if i % 2 == 0 else 113))
        for i in range(40)])
    blobs = [s.read_bytes()[:20000] for s in sources] + [ng]
    f = tmp_path / "fuzz.pcap"
    n_ok = n_err = 0
    for blob in blobs:
        for d in _mutations(blob, rng, 40):
            f.write_bytes(d)
            for salvage in (False, True):
                try:
                    pk = C.read_pcap(f, salvage=salvage)
                    C.analyze_tcp(pk, resolution="100ms")
                    n_ok += 1
                except AirlinkError as exc:
                    assert str(f) in str(exc) and "\n" not in str(exc)
                    n_err += 1
    assert n_ok > 0 and n_err > 0
