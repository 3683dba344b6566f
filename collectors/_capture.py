"""Capture-file layer: pcap / pcapng / gzip -> batches of raw records.

The reader yields :class:`RecordBatch` objects: one numpy ``uint8`` buffer plus, per
record, the offset of its packet bytes in the buffer, captured and original length,
timestamp (int64 ns since the Unix epoch), link type and interface number. Packet
decoding (``_decode``) works on whole batches with numpy gathers.

Classic pcap records form a chain (``next = offset + 16 + caplen``). They are walked in C
(``collectors/_records.c``, built by ``pip install`` when a compiler exists: ~20 ms per
million records). Without it they are located without a per-record Python loop: every
byte position of a chunk is screened for a plausible record header (timestamp seconds
near the first record's, sub-second field and lengths in range), the survivors are checked
in full and the chain is verified in one vector comparison. When the chain does not verify
(garbage, truncation, an unlucky payload), the chunk is walked record by record in Python.
The C walk and the Python walk make the same checks and the same error messages.

Errors raise :class:`CaptureError` naming file, byte offset, packet number and how many
packets were read before it; with ``salvage=True`` reading stops there instead and the
batches read so far are kept (``reader.problem`` holds the message).
"""
from __future__ import annotations

import gzip
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from airlink.traces.errors import FormatError

try:                                   # the record walk and header decoder in C, built by pip when gcc exists
    from . import _records
except ImportError:                    # pragma: no cover - depends on the build
    _records = None
if os.environ.get("AIRLINK_PURE_PYTHON"):   # as for the replay shells: no compiled parts
    _records = None

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),        # little endian, microseconds
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),           # little endian, nanoseconds
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
GZIP_MAGIC = b"\x1f\x8b"
MAX_RECORD = 262144          # libpcap's MAXIMUM_SNAPLEN
# bytes read per batch: 4 MiB keeps a batch's bytes and its decoded columns in cache (the
# record walk and the header decoder take ~0.6x the time they take on 16 MiB batches, for
# ~50 more batches per GB of per-batch Python)
CHUNK = 4 << 20


class CaptureError(FormatError):
    """A capture file is damaged at a known place."""

    def __init__(self, message, *, offset=None, packet=None, packets_read=0):
        super().__init__(message)
        self.offset, self.packet, self.packets_read = offset, packet, packets_read


@dataclass
class RecordBatch:
    buf: np.ndarray          # uint8, padded with zeros at the end
    data_off: np.ndarray     # int64 offset of each packet's first byte in buf
    caplen: np.ndarray       # int64 captured bytes
    origlen: np.ndarray      # int64 bytes on the wire
    ts_ns: np.ndarray        # int64 ns since the epoch
    linktype: np.ndarray     # int32 per record
    iface: np.ndarray        # uint8 interface number (pcapng), 0 for pcap
    first_packet: int        # 1-based number of the first record in this batch


_EPB = {"<": b"\x06\x00\x00\x00", ">": b"\x00\x00\x00\x06"}   # enhanced packet block type
_AR4 = np.arange(4)
_AR16 = np.arange(16)
PAD = 128                    # zero bytes after each buffer so header gathers never overrun


def sniff_kind(head: bytes) -> str | None:
    """'pcap', 'pcapng', 'gzip' or None from a file's first bytes."""
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        return "pcapng"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    return None


class GzipStream:
    """Decompress a gzip file (one or more members) and keep every byte that precedes
    damage: a stream cut short, a corrupt deflate block, a bad CRC/length trailer or
    trailing garbage ends the data where zlib could no longer decode it (Python's
    ``gzip`` module loses the whole read that hits the damage). ``readinto`` returns
    the decoded bytes; the first call past the damage raises :class:`GzipDamage`
    (``.compressed_offset``: the byte of the compressed file where decoding stopped)."""

    PIECE = 1 << 16                    # compressed bytes fed to zlib at a time

    def __init__(self, path):
        self._f = open(path, "rb")
        self._d = zlib.decompressobj(31)
        self._member_fed = False       # bytes of the current member given to zlib
        self._pending = memoryview(b"")
        self._in = 0                   # compressed bytes consumed
        self._damage = None
        self._end = False

    def close(self):
        self._f.close()

    def read(self, n) -> bytes:
        out = bytearray(n)
        k = self.readinto(memoryview(out))
        return bytes(out[:k])

    def readinto(self, view) -> int:
        done = 0
        while done < len(view):
            if not len(self._pending):
                if self._damage is not None:
                    if done:
                        return done
                    raise self._damage
                if self._end:
                    break
                self._pending = memoryview(self._more())
                continue
            k = min(len(view) - done, len(self._pending))
            view[done:done + k] = self._pending[:k]
            self._pending = self._pending[k:]
            done += k
        return done

    def _stop(self, what):
        self._damage = GzipDamage(what, self._in)
        self._end = True

    def _more(self) -> bytes:
        """The next decoded bytes (possibly empty); sets the end or the damage."""
        piece = self._f.read(self.PIECE)
        if not piece:
            if self._member_fed and not self._d.eof:
                self._stop(f"compressed stream cut short (gzip member unfinished at compressed byte "
                           f"{self._in})")
            self._end = True
            return b""
        outs = []
        while piece:
            if self._d.eof:                        # next member, zero padding, or garbage
                if not piece.strip(b"\0"):
                    self._in += len(piece)
                    break
                if piece[:2] != GZIP_MAGIC[:len(piece[:2])]:
                    self._stop(f"trailing bytes that are not gzip data at compressed byte {self._in}")
                    break
                self._d = zlib.decompressobj(31)
                self._member_fed = False
            before = self._d.copy()
            try:
                outs.append(self._d.decompress(piece))
            except zlib.error as exc:
                # decode byte by byte from the state before this piece: keep all output up
                # to the byte where zlib detects the damage
                self._d = before
                for i in range(len(piece)):
                    try:
                        outs.append(self._d.decompress(piece[i:i + 1]))
                    except zlib.error:
                        self._in += i
                        break
                self._stop(f"corrupt compressed data ({exc}) at compressed byte {self._in}")
                break
            self._member_fed = True
            rest = self._d.unused_data if self._d.eof else b""
            self._in += len(piece) - len(rest)
            piece = rest
        return b"".join(outs)


class GzipDamage(Exception):
    def __init__(self, what, compressed_offset):
        super().__init__(what)
        self.compressed_offset = compressed_offset


def _open(path: Path):
    f = open(path, "rb")
    head = f.read(4)
    f.seek(0)
    if head[:2] == GZIP_MAGIC:
        f.close()
        return GzipStream(path), True
    return f, False


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class CaptureReader:
    """Iterate over :class:`RecordBatch` es of a pcap, pcapng or gzip-compressed capture."""

    def __init__(self, path, *, salvage: bool = False, chunk: int = CHUNK, progress=None,
                 reuse_buffer: bool = False):
        """``reuse_buffer=True``: classic-pcap batches share one buffer, overwritten by the
        next batch - for consumers that are done with a batch before asking for the next
        (saves a fresh batch buffer, and its page faults, per batch)."""
        self.path = Path(path)
        self.reuse_buffer = reuse_buffer
        self._buffer = None
        self._walk_out = None
        self.name = str(path)
        self.salvage = salvage
        self.chunk = chunk
        self.problem = None
        self.packets = 0
        self.progress = progress       # callable(bytes_done) or None
        self.format = None
        self.linktypes = set()
        self._damage = None            # compressed-stream damage, reported after the data before it

    # -- errors -----------------------------------------------------------------
    def _fail(self, what, offset, packet=None):
        pk = self.packets + 1 if packet is None else packet
        if self._damage is not None:   # what follows compressed-stream damage is its consequence
            what = f"{self._damage}: {what}"
        msg = (f"{self.name}: {what} at byte {offset} (packet {pk}); "
               f"{pk - 1} packets read")
        if self.salvage:
            self.problem = msg
            return
        raise CaptureError(msg, offset=offset, packet=pk, packets_read=pk - 1)

    # -- entry ------------------------------------------------------------------
    def __iter__(self):
        if not self.path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(self.path))
        if self.path.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(self.path))
        f, gz = _open(self.path)
        try:
            try:
                head = f.read(24 if not gz else 24)
            except (OSError, EOFError, gzip.BadGzipFile, GzipDamage) as exc:
                raise CaptureError(f"{self.name}: cannot decompress ({exc}) at byte 0 "
                                   f"(packet 1); 0 packets read", offset=0, packet=1) from None
            if not head:
                raise CaptureError(f"{self.name}: empty file (0 bytes); expected a pcap or pcapng "
                                   f"capture", offset=0, packet=1)
            kind = sniff_kind(head)
            if kind == "pcap":
                self.format = "pcap" + (".gz" if gz else "")
                yield from self._pcap(f, head)
            elif kind == "pcapng":
                self.format = "pcapng" + (".gz" if gz else "")
                yield from self._pcapng(f, head)
            else:
                raise CaptureError(
                    f"{self.name}: not a capture file: wrong magic {head[:4].hex()} at byte 0 "
                    f"(packet 1); 0 packets read (expected pcap a1b2c3d4/a1b23c4d or pcapng "
                    f"0a0d0d0a)", offset=0, packet=1)
        finally:
            f.close()

    def _readinto(self, f, view) -> int:
        """Fill ``view`` from the file (short only at the end); damage -> _fail, 0."""
        done = 0
        try:
            while done < len(view):
                k = f.readinto(view[done:])
                if not k:
                    break
                done += k
        except GzipDamage as exc:          # the bytes before it are kept and parsed first
            self._damage = f"compressed data is damaged: {exc}"
        except (OSError, EOFError, gzip.BadGzipFile, Exception) as exc:  # zlib.error too
            self._fail(f"compressed data is damaged ({type(exc).__name__}: {exc})", self._consumed + done)
        return done

    def _read(self, f, n):
        try:
            return f.read(n)
        except GzipDamage as exc:
            self._damage = f"compressed data is damaged: {exc}"
            return b""
        except (OSError, EOFError, gzip.BadGzipFile, Exception) as exc:  # zlib.error too
            self._fail(f"compressed data is damaged ({type(exc).__name__}: {exc})", self._consumed)
            return b""

    # -- classic pcap -----------------------------------------------------------
    def _pcap(self, f, head):
        if len(head) < 24:
            raise CaptureError(f"{self.name}: truncated pcap file header ({len(head)} of 24 "
                               f"bytes) at byte 0 (packet 1); 0 packets read", offset=0, packet=1)
        endian, ns_per_tick = PCAP_MAGICS[head[:4]]
        _, _, _, _, snaplen, network = struct.unpack(endian + "HHiIII", head[4:24])
        linktype = network & 0x0FFFFFFF
        self.linktypes.add(linktype)
        self.snaplen = snaplen
        self.endian = endian
        frac_max = 1_000_000 if ns_per_tick == 1000 else 1_000_000_000
        limit = max(snaplen, MAX_RECORD)
        self._consumed = 24
        carry = b""
        ts_hi = None
        eof = False
        while not eof and self.problem is None:
            # one buffer per chunk: carried-over bytes, then the file data read in place, then
            # zero bytes (no concatenation copies). A numpy buffer, not a bytearray: numpy asks
            # for transparent huge pages on large allocations, so filling it costs a few page
            # faults instead of one per 4 KiB (a large share of the read time in a VM)
            need = len(carry) + self.chunk + PAD
            if self.reuse_buffer:
                if self._buffer is None or len(self._buffer) < need:
                    self._buffer = np.empty(need + MAX_RECORD, np.uint8)   # room for carries
                block = self._buffer[:need]
            else:
                block = np.empty(need, np.uint8)
            block[:len(carry)] = np.frombuffer(carry, np.uint8)
            got = self._readinto(f, memoryview(block)[len(carry):len(carry) + self.chunk])
            block[len(carry) + got:] = 0
            if not got or self._damage is not None:
                eof = True
            n = len(carry) + got
            if n == 0:
                break
            raw = memoryview(block)[:n]
            buf = block
            if _records is not None:
                data_off, cap, orig, ts_ns, stop = self._pcap_walk_c(buf, n, endian, ns_per_tick,
                                                                     frac_max, limit)
            else:
                if ts_hi is None and n >= 4:
                    ts_hi = struct.unpack(endian + "I", raw[:4])[0]
                offs = self._pcap_fast(buf, n, endian, ts_hi, frac_max, limit) if ts_hi is not None else None
                if offs is None:
                    offs, stop = self._pcap_walk(raw, n, endian, frac_max, limit, eof)
                else:
                    stop = int(offs[-1] + 16 + self._u32(buf, offs[-1:] + 8, endian)[0]) if len(offs) else 0
                hdr = np.lib.stride_tricks.sliding_window_view(buf, 16)[offs].view(endian + "u4")
                sec, frac, cap, orig = (hdr[:, k].astype(np.int64) for k in range(4))
                data_off, ts_ns = offs + 16, sec * 1_000_000_000 + frac * ns_per_tick
                del hdr, sec, frac
            if len(data_off):
                batch = RecordBatch(buf, data_off, cap, orig, ts_ns,
                                    np.full(len(data_off), linktype, np.int32),
                                    np.zeros(len(data_off), np.uint8), self.packets + 1)
                self.packets += len(data_off)
                yield batch
            self._consumed += stop
            carry = bytes(raw[stop:])
            del raw
            if self.progress:
                self.progress(self._consumed)
            if eof and carry and self.problem is None:
                what = ("truncated record header" if len(carry) < 16 else
                        f"truncated record ({len(carry) - 16} of "
                        f"{struct.unpack(endian + 'I', carry[8:12])[0]} captured bytes present)")
                self._fail(what, self._consumed)
                break
        if self._damage is not None and self.problem is None:
            self._fail("end of the data", self._consumed)
        self._buffer = self._mask = self._walk_out = None   # the reused buffers are not needed any more

    def _pcap_walk_c(self, buf, n, endian, ns_per_tick, frac_max, limit):
        """The record walk of :meth:`_pcap_walk` in C (``collectors/_records.c``): per
        complete record its packet-data offset, captured and original length and timestamp
        (int64 ns), and the offset after the last one; damage -> _fail, as in the walk."""
        need = n // 16 + 1
        if self._walk_out is None or len(self._walk_out[0]) < need:
            self._walk_out = [np.empty(need, np.int64) for _ in range(4)]
        count, stop, status = _records.walk(buf, n, endian == "<", ns_per_tick, frac_max,
                                            limit, *self._walk_out)
        if status:                        # the header at stop is impossible: say why, as the walk
            _, frac, cap, _ = struct.unpack(endian + "IIII", bytes(buf[stop:stop + 16]))
            self._fail(self._header_problem(cap, frac, frac_max, limit), self._consumed + stop,
                       self.packets + count + 1)
        return (*(a[:count].copy() for a in self._walk_out), stop)

    def _header_problem(self, cap, frac, frac_max, limit):
        """What is impossible in a pcap record header (captured length, then sub-second
        field), or None; the C walk stops on the same two conditions."""
        if cap > limit:
            return f"impossible captured length {cap} (snaplen {self.snaplen})"
        if frac >= frac_max:
            return f"impossible timestamp fraction {frac}"
        return None

    @staticmethod
    def _u32(buf, idx, endian):
        """32-bit integers at arbitrary (unaligned) byte offsets."""
        b = [buf[idx + k].astype(np.uint32) for k in range(4)]
        if endian == "<":
            return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
        return b[3] | (b[2] << 8) | (b[1] << 16) | (b[0] << 24)

    def _pcap_fast(self, buf, n, endian, ts_hi, frac_max, limit):
        """Record offsets of the complete records in buf[:n] by screening, or None."""
        if n < 16:
            return np.zeros(0, np.int64) if n == 0 else None
        m = n - 15                        # candidate positions 0..n-16
        top = (ts_hi >> 24) & 0xFF
        if endian == "<":
            sec_top, frac_top, cap_top, orig_top = 3, 7, 11, 15
        else:
            sec_top, frac_top, cap_top, orig_top = 0, 4, 8, 12
        b = buf
        # one full pass on the rarest byte (top byte of the seconds), then gathers on survivors
        # the comparison goes into one mask buffer kept for the whole file: a fresh chunk-sized
        # array per chunk would cost its page faults every time
        mask = getattr(self, "_mask", None)
        if mask is None or len(mask) < m:
            mask = self._mask = np.empty(m, bool)
        mask = mask[:m]
        np.equal(b[sec_top:sec_top + m], top, out=mask)
        cand = np.flatnonzero(mask)
        del mask
        if (ts_hi & 0xFFFFFF) > 0xFF0000 or (ts_hi & 0xFFFFFF) < 0x010000:   # near a top-byte change
            cand = np.union1d(cand, np.flatnonzero(b[sec_top:sec_top + m] == ((top + 1) & 0xFF)))
            cand = np.union1d(cand, np.flatnonzero(b[sec_top:sec_top + m] == ((top - 1) & 0xFF)))
        keep = (b[cand + cap_top] == 0) & (b[cand + orig_top] == 0) \
            & (b[cand + frac_top] < (0x01 if frac_max == 1_000_000 else 0x3C))
        cand = cand[keep].astype(np.int64)
        if len(cand) == 0 or cand[0] != 0:
            return None
        hdr = np.lib.stride_tricks.sliding_window_view(buf, 16)[cand].view(endian + "u4")
        sec, frac, cap, orig = hdr[:, 0].astype(np.int64), hdr[:, 1], hdr[:, 2].astype(np.int64), hdr[:, 3]
        good = (frac < frac_max) & (cap <= limit) & (np.abs(sec - ts_hi) < 400 * 86400) & (orig <= (1 << 24))
        cand, cap = cand[good], cap[good]
        if len(cand) == 0 or cand[0] != 0:
            return None
        nxt = cand + 16 + cap
        if not np.array_equal(nxt[:-1], cand[1:]):
            return None
        if nxt[-1] > n:                   # last record incomplete: carry it over
            cand = cand[:-1]
        elif nxt[-1] <= n - 16:           # a complete header follows but was not recognised
            return None
        return cand

    def _pcap_walk(self, raw, n, endian, frac_max, limit, eof):
        """Record by record; returns (offsets, stop) and reports damage via _fail."""
        offs = []
        p = 0
        unpack = struct.Struct(endian + "IIII").unpack_from
        while p + 16 <= n:
            sec, frac, cap, orig = unpack(raw, p)
            problem = self._header_problem(cap, frac, frac_max, limit)
            if problem:
                self._fail(problem, self._consumed + p, self.packets + len(offs) + 1)
                return np.asarray(offs, np.int64), p
            if p + 16 + cap > n:
                break
            offs.append(p)
            p += 16 + cap
        offs = np.asarray(offs, np.int64)
        return offs, p

    # -- pcapng -----------------------------------------------------------------
    def _pcapng(self, f, head):
        """Blocks are walked one by one in Python, except runs of enhanced packet blocks,
        which are located with the same screen-and-verify-the-chain method as pcap records."""
        self._consumed = 0
        raw = head + self._read_all(f)
        n = len(raw)
        buf = np.frombuffer(raw + bytes(PAD), dtype=np.uint8)
        endian = None
        ifaces = []          # (linktype, (mult, div) ns per tick, snaplen)
        p = 0
        offs, caps, origs, ts, lts, ifs = [], [], [], [], [], []
        runs = []

        def flush():
            if offs:
                runs.append((np.asarray(offs, np.int64), np.asarray(caps, np.int64),
                             np.asarray(origs, np.int64), np.asarray(ts, np.int64),
                             np.asarray(lts, np.int32), np.asarray(ifs, np.int64)))
                self.packets += len(offs)
                for lst in (offs, caps, origs, ts, lts, ifs):
                    lst.clear()

        while p < n:
            if endian is not None and ifaces and raw[p:p + 4] == _EPB[endian]:
                q, run = self._epb_run(buf, p, n, endian, ifaces)
                if run is not None:
                    flush()
                    runs.append(run)
                    self.packets += len(run[0])
                    p = q
                    continue
            if p + 12 > n:
                self._fail("truncated block header", p, self.packets + len(offs) + 1)
                break
            btype_raw = raw[p:p + 4]
            if btype_raw == PCAPNG_MAGIC:
                bom = raw[p + 8:p + 12]
                if bom == b"\x4d\x3c\x2b\x1a":
                    endian = "<"
                elif bom == b"\x1a\x2b\x3c\x4d":
                    endian = ">"
                else:
                    self._fail(f"bad pcapng byte-order magic {bom.hex()}", p + 8,
                               self.packets + len(offs) + 1)
                    break
                ifaces = []
            if endian is None:
                self._fail("pcapng file does not start with a section header block", p, 1)
                break
            try:
                if not self._pcapng_block(raw, p, n, endian, ifaces, offs, caps, origs, ts, lts, ifs):
                    break
            except struct.error:
                self._fail("damaged block (fields run past its end)", p, self.packets + len(offs) + 1)
                break
            p += struct.unpack_from(endian + "I", raw, p + 4)[0]
        flush()
        self._consumed = p
        if self._damage is not None and self.problem is None:
            self._fail("end of the data", p, self.packets + 1)
        if runs:
            cols = [np.concatenate([r[k] for r in runs]) for k in range(6)]
            yield RecordBatch(buf, cols[0], cols[1], cols[2], cols[3], cols[4],
                              np.minimum(cols[5], 255).astype(np.uint8), 1)
        if self.progress:
            self.progress(p)

    def _epb_run(self, buf, p, n, endian, ifaces):
        """(end offset, arrays) of the longest chain of well-formed enhanced packet blocks
        starting at p within a 16 MB window, or (p, None) to let the block walker go on."""
        hi = min(n, p + (16 << 20))
        if hi - p < 32:
            return p, None
        t = _EPB[endian]
        mask = buf[p:hi] == t[0]
        for k in (1, 2, 3):
            mask &= buf[p + k:hi + k] == t[k]
        cand = p + np.flatnonzero(mask).astype(np.int64)
        u32 = lambda idx: np.lib.stride_tricks.sliding_window_view(buf, 4)[idx].view(endian + "u4")[:, 0]
        blen = u32(cand + 4).astype(np.int64)
        ok = (blen % 4 == 0) & (blen >= 32) & (cand + blen <= n)
        cand, blen = cand[ok], blen[ok]
        ok = u32(cand + blen - 4) == blen
        cand, blen = cand[ok], blen[ok]
        for _ in range(3):                       # drop look-alikes inside packet data
            keep = np.isin(cand, cand + blen) | (cand == p)
            if keep.all():
                break
            cand, blen = cand[keep], blen[keep]
        if not len(cand) or cand[0] != p:
            return p, None
        brk = np.flatnonzero(cand[1:] != (cand + blen)[:-1])
        k = int(brk[0]) + 1 if len(brk) else len(cand)
        cand, blen = cand[:k], blen[:k]
        f = np.lib.stride_tricks.sliding_window_view(buf, 28)[cand].view(endian + "u4")
        iid = f[:, 2].astype(np.int64)
        ticks = (f[:, 3].astype(np.uint64) << np.uint64(32)) | f[:, 4].astype(np.uint64)
        cap, orig = f[:, 5].astype(np.int64), f[:, 6].astype(np.int64)
        mult = np.array([tk[0] if tk[1] == 1 else -1 for _, tk, _ in ifaces], np.int64)
        lt = np.array([x[0] for x in ifaces], np.int32)
        m = mult[np.minimum(iid, len(ifaces) - 1)]
        bad = (iid >= len(ifaces)) | (28 + cap + 4 > blen) | (m < 0) \
            | (ticks >= np.uint64(1 << 62) // np.maximum(m, 1).astype(np.uint64))
        if bad.any():                            # the walker reports (or handles) that block
            k = int(np.argmax(bad))
            if k == 0:
                return p, None
            cand, blen, iid, ticks, cap, orig, m = (a[:k] for a in (cand, blen, iid, ticks, cap, orig, m))
        ts = ticks.astype(np.int64) * m
        return int(cand[-1] + blen[-1]), (cand + 28, cap, orig, ts, lt[np.minimum(iid, len(ifaces) - 1)], iid)

    def _pcapng_block(self, raw, p, n, endian, ifaces, offs, caps, origs, ts, lts, ifs) -> bool:
        """Parse one block at p; False (after reporting) when reading must stop."""
        btype, blen = struct.unpack_from(endian + "II", raw, p)
        if blen < 12 or blen % 4 or p + blen > n:
            what = ("truncated block" if blen >= 12 and blen % 4 == 0 else
                    f"impossible block length {blen}")
            self._fail(what, p, self.packets + len(offs) + 1)
            return False
        if (btype == 1 and blen < 20) or (btype == 6 and blen < 32) or (btype == 3 and blen < 16):
            self._fail(f"impossible block length {blen}", p, self.packets + len(offs) + 1)
            return False
        body = p + 8
        if btype == 1:                                     # interface description
            lt, _, snap = struct.unpack_from(endian + "HHI", raw, body)
            tick = (1000, 1)                                   # ns = ticks * a // b
            q = body + 8
            while q + 4 <= p + blen - 4:
                code, olen = struct.unpack_from(endian + "HH", raw, q)
                if code == 0:
                    break
                if code == 9 and olen >= 1:
                    r = raw[q + 4]
                    e = r & 0x7F
                    tick = ((10 ** 9, 10 ** e) if not r & 0x80 else (10 ** 9, 2 ** e))
                    if tick[1] <= 10 ** 9 and tick[0] % tick[1] == 0:
                        tick = (tick[0] // tick[1], 1)
                q += 4 + ((olen + 3) & ~3)
            ifaces.append((lt, tick, snap))
            self.linktypes.add(lt)
        elif btype in (6, 3):                              # enhanced / simple packet
            if btype == 6:
                if blen < 32:
                    self._fail(f"impossible block length {blen}", p, self.packets + len(offs) + 1)
                    return False
                iid, th, tl, cap, orig = struct.unpack_from(endian + "IIIII", raw, body)
                start = body + 20
            else:
                iid, th, tl = 0, 0, 0
                (orig,) = struct.unpack_from(endian + "I", raw, body)
                cap = min(orig, blen - 16)
                start = body + 4
            if iid >= len(ifaces):
                self._fail(f"packet refers to undeclared interface {iid}", p,
                           self.packets + len(offs) + 1)
                return False
            if start + cap > p + blen:
                self._fail(f"impossible captured length {cap}", p, self.packets + len(offs) + 1)
                return False
            lt, tick, _ = ifaces[iid]
            tsv = (th << 32) | tl
            tns = tsv * tick[0] // tick[1]
            if tns >= 1 << 62:
                self._fail(f"impossible timestamp {tsv}", p, self.packets + len(offs) + 1)
                return False
            offs.append(start)
            caps.append(cap)
            origs.append(orig)
            ts.append(tns)
            lts.append(lt)
            ifs.append(iid)
        return True

    def _read_all(self, f):
        parts = []
        while True:
            d = self._read(f, self.chunk)
            if not d:
                break
            parts.append(d)
            if self.problem:
                break
        return b"".join(parts)
