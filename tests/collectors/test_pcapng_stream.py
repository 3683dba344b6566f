"""pcapng read in chunks like pcap: several sections (both byte orders), interfaces with their
own link types and timestamp resolutions, enhanced/simple/obsolete packet blocks, blocks to
skip, damage reported with its byte offset. Values are checked against tshark's reading of
the same files and against the libpcap originals of real captures converted by editcap."""
from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors import _capture

from tests.collectors.pcapcraft import _block, link_wrap, tcp_packet

T0 = 1_700_000_000 * 10**9
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
needs_editcap = pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap is not installed")


def shb(e):
    return _block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1), e)


def idb(lt, e, tsresol=None, tsoffset=None, snaplen=65535):
    opts = b""
    if tsresol is not None:
        opts += struct.pack(e + "HH", 9, 1) + bytes([tsresol]) + b"\0" * 3
    if tsoffset is not None:
        opts += struct.pack(e + "HHq", 14, 8, tsoffset)
    if opts:
        opts += struct.pack(e + "HH", 0, 0)
    return _block(1, struct.pack(e + "HHI", lt, 0, snaplen) + opts, e)


def epb(iface, ticks, data, e, comment=None):
    body = struct.pack(e + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)) + data
    body += b"\0" * ((-len(body)) % 4)
    if comment is not None:                       # opt_comment, then opt_endofopt
        c = comment.encode()
        body += struct.pack(e + "HH", 1, len(c)) + c + b"\0" * ((-len(c)) % 4) + struct.pack(e + "HH", 0, 0)
    return _block(6, body, e)


def spb(data, e):
    return _block(3, struct.pack(e + "I", len(data)) + data, e)


def mixed_capture():
    """(bytes, [(time ns, seq) of every packet in file order]) - section 1 little endian:
    Ethernet in microseconds and raw IP in nanoseconds, with statistics, name-resolution,
    unknown and comment-carrying blocks between packets; section 2 big endian: Linux cooked
    SLL in 2^-20 s and Ethernet 10 s behind (if_tsoffset), a simple packet block."""
    out, expect = [shb("<"), idb(1, "<"), idb(101, "<", tsresol=9)], []
    for i in range(30):
        iface = i % 2
        t = T0 + i * 1_234_000 + (789 if iface else 0)            # ns; whole microseconds on iface 0
        seq = 1000 + i * 100
        pkt = link_wrap(tcp_packet(seq=seq, payload=b"a" * (20 + i)), 1 if iface == 0 else 101)
        out.append(epb(iface, t // 1000 if iface == 0 else t, pkt, "<", comment="hi" if i == 5 else None))
        expect.append((t, seq))
        if i == 10:
            out.append(_block(5, struct.pack("<IIII", 0, 0, 0, 0), "<"))        # interface statistics
            out.append(_block(4, struct.pack("<HH", 0, 0), "<"))                # name resolution (empty)
            out.append(_block(0x0BAD0001, b"\xde\xad\xbe\xef" * 5, "<"))        # unknown type
    out += [shb(">"), idb(113, ">", tsresol=0x94), idb(1, ">", tsoffset=-10)]
    for i in range(20):
        iface = i % 2
        t = T0 + 50 * 10**9 + i * 3_000_000
        seq = 90000 + i * 10
        pkt = link_wrap(tcp_packet(src="10.1.0.1", seq=seq, payload=b"b" * 30), 113 if iface == 0 else 1)
        if iface == 0:
            ticks = (t // 10**9 << 20) + ((t % 10**9) << 20) // 10**9
            tns = (ticks * 10**9) >> 20
        else:
            ticks, tns = (t + 10 * 10**9) // 1000, t
        out.append(epb(iface, ticks, pkt, ">"))
        expect.append((tns, seq))
    out.append(spb(link_wrap(tcp_packet(src="10.1.0.1", seq=77, payload=b"c"), 113), ">"))
    expect.append((0, 77))
    return b"".join(out), expect


def tshark_fields(path, *fields):
    res = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-E", "separator=,",
                          "-o", "tcp.relative_sequence_numbers:FALSE"] + [a for f in fields for a in ("-e", f)],
                         capture_output=True, text=True)
    rows = [ln.split(",") for ln in res.stdout.splitlines()]
    return rows, res


def epoch_ns(text):
    """tshark's frame.time_epoch in ns; a simple packet block has none (airlink: 0)."""
    if not text:
        return 0
    s, _, frac = text.partition(".")
    return int(s) * 10**9 + int((frac + "000000000")[:9])


def records(path, **kw):
    rows = []
    for b in _capture.CaptureReader(path, **kw):
        for k in range(len(b.data_off)):
            o, c = int(b.data_off[k]), int(b.caplen[k])
            rows.append((int(b.ts_ns[k]), c, int(b.origlen[k]), int(b.linktype[k]), int(b.iface[k]),
                         bytes(b.buf[o:o + c])))
    return rows


def test_sections_interfaces_resolutions(tmp_path):
    data, expect = mixed_capture()
    f = tmp_path / "mixed.pcapng"
    f.write_bytes(data)
    pk = C.read_pcap(f)
    assert sorted(pk.attrs["linktypes"]) == [1, 101, 113]
    got = sorted(zip(pk["time"].astype("int64").tolist(), pk["seq"].astype("int64").tolist()))
    assert got == sorted(expect)


@needs_tshark
def test_agrees_with_tshark(tmp_path):
    f = tmp_path / "mixed.pcapng"
    f.write_bytes(mixed_capture()[0])
    rows, res = tshark_fields(f, "frame.time_epoch", "tcp.seq", "ip.src", "frame.len", "frame.cap_len")
    assert res.returncode == 0, res.stderr
    theirs = [(epoch_ns(t), int(s), src, int(ln), int(cl)) for t, s, src, ln, cl in rows]
    assert len(theirs) == 51
    # the records in file order: time, original and captured length
    assert [(r[0], r[2], r[1]) for r in records(f)] == [(t, ln, cl) for t, _, _, ln, cl in theirs]
    pk = C.read_pcap(f)
    ours = zip(pk["time"].astype("int64").tolist(), pk["seq"].astype("int64").tolist(),
               pk["src"].astype(str).tolist(), pk["captured_bytes"].tolist())
    assert sorted(ours) == sorted((t, s, src, cl) for t, s, src, _, cl in theirs)


@pytest.mark.parametrize("pure", [False, True])
def test_chunk_boundaries_and_twins(tmp_path, monkeypatch, pure):
    """Every chunk size (blocks cut anywhere, blocks longer than a chunk) gives the same
    records; the Python block walk gives what the C walk gives."""
    data, _ = mixed_capture()
    f = tmp_path / "mixed.pcapng"
    f.write_bytes(data)
    whole = records(f)
    if pure:
        monkeypatch.setattr(_capture, "_records", None)
    for chunk in (7, 64, 100, 333, 4096):
        assert records(f, chunk=chunk) == whole
        assert records(f, chunk=chunk, reuse_buffer=True) == whole
    g = tmp_path / "mixed.pcapng.gz"
    g.write_bytes(gzip.compress(data))
    assert records(g, chunk=100) == whole


def damaged_capture():
    """The mixed capture with the trailing length of its 12th packet block changed."""
    data, expect = mixed_capture()
    p, k = 0, 0
    while True:
        btype, blen = struct.unpack_from("<II", data, p)
        if btype == 6:
            k += 1
            if k == 12:
                break
        p += blen
    bad = bytearray(data)
    bad[p + blen - 4:p + blen] = struct.pack("<I", blen + 4)
    return bytes(bad), p, blen, expect[:11]


@needs_tshark
def test_damaged_block_offset_and_salvage(tmp_path, run_airlink):
    bad, off, blen, before = damaged_capture()
    f = tmp_path / "capture.pcapng"
    f.write_bytes(bad)
    msg = (f"{f}: damaged block at byte {off} (block type 0x00000006, length {blen}: the length at its "
           f"end is {blen + 4}; packet 12); 11 packets read")
    with pytest.raises(C.CaptureError) as exc:
        C.read_pcap(f)
    assert str(exc.value) == msg and exc.value.offset == off
    pk = C.read_pcap(f, salvage=True)
    assert list(zip(pk["time"].astype("int64"), pk["seq"].astype("int64"))) == sorted(before)
    rows, res = tshark_fields(f, "tcp.seq")                     # tshark stops at the same block
    assert [int(r[0]) for r in rows] == [s for _, s in before] and res.returncode != 0
    status, out, err = run_airlink("collect", f, "-o", tmp_path / "out")
    assert status == 2 and err.strip() == f"airlink: error: {msg}"
    g = tmp_path / "capture.pcapng.gz"
    g.write_bytes(gzip.compress(bad))
    status, out, err = run_airlink("collect", g, "-o", tmp_path / "out2", "--salvage", "--json")
    assert status == 0 and "damaged block at byte" in err and '"packets": 11' in out


def real_captures(shared_data):
    base = shared_data / "tcp-pcaps"
    return [base / "zeek-head/206_example_b.pcap", base / "zeek-head/timestamp.pcap",
            base / "tcprs/composite/comp005.trace", base / "tcprs/rto/rto001.trace"]


@needs_editcap
def test_editcap_pcapng_equals_libpcap(shared_data, tmp_path):
    """A real capture converted by ``editcap -F pcapng`` gives the frames of its original,
    read whole and streamed through the flow groups (census + one pass)."""
    for src in real_captures(shared_data):
        ng = tmp_path / (src.stem + ".pcapng")
        subprocess.run(["editcap", "-F", "pcapng", str(src), str(ng)], check=True)
        a, b = C.read_pcap(src), C.read_pcap(ng)
        pd.testing.assert_frame_equal(a, b)
        for limit in (None, 40):
            x, y = C.analyze_tcp(src, max_packets=limit), C.analyze_tcp(ng, max_packets=limit)
            for name in ("flows", "series", "events"):
                pd.testing.assert_frame_equal(getattr(x, name), getattr(y, name))


MEMORY_SCRIPT = textwrap.dedent("""
    import resource, sys
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from airlink.collectors import _capture, _decode
    n = payload = 0
    for b in _capture.CaptureReader(sys.argv[1], reuse_buffer=True):
        d = _decode.decode(b)
        n += len(b.data_off)
        payload += int(d["payload"].sum())
    print(n, payload)
""")


def test_bounded_memory(tmp_path):
    """A 240 MB pcapng is read and decoded under an address-space limit of 200 MiB above
    what the interpreter and numpy take: the file is never held whole."""
    pkt = link_wrap(tcp_packet(seq=5, payload=b"z" * 100), 1)
    unit = shb("<") + idb(1, "<", tsresol=9)
    block = np.frombuffer(epb(0, T0, pkt, "<"), np.uint8)
    count = 240_000_000 // len(block)
    f = tmp_path / "big.pcapng"
    with open(f, "wb") as out:
        out.write(unit)
        np.tile(block, count).tofile(out)
    probe = subprocess.run([sys.executable, "-c", "import numpy, airlink.collectors._decode;"
                            "print(open('/proc/self/status').read().split('VmPeak:')[1].split()[0])"],
                           capture_output=True, text=True, check=True)
    base = int(probe.stdout) * 1024
    res = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(f), str(base + (200 << 20))],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == [str(count), str(count * 100)]
