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

pcapng is read in the same chunks: packet blocks (enhanced, simple, obsolete) are walked in
C (``_records.walk_ng``) or by ``CaptureReader._ng_walk``, its Python twin; section headers
(either byte order; each resets the interface list), interface descriptions (link type,
``if_tsresol``, ``if_tsoffset`` per interface) and every other block (statistics, name
resolution, comments, unknown types) go through ``CaptureReader._ng_block``. A damaged
block is reported with its byte offset, type and length.

Errors raise :class:`CaptureError` naming file, byte offset, packet number and how many
packets were read before it; with ``salvage=True`` reading stops there instead and the
batches read so far are kept (``reader.problem`` holds the message).
"""
from __future__ import annotations

import gzip
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from airlink.core.envflags import env_flag

from airlink.core.errors import FormatError

try:                                   # Intel ISA-L's inflate: the same bytes as zlib's, ~3x as fast
    from isal import isal_zlib as _isal_zlib
except ImportError:                    # pragma: no cover - depends on the install
    _isal_zlib = None

try:                                   # the record walk and header decoder in C, built by pip when gcc exists
    from . import _records
except ImportError:                    # pragma: no cover - depends on the build
    _records = None
if env_flag("AIRLINK_PURE_PYTHON", False):   # as for the replay shells: no compiled parts
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
NG_MAX_BLOCK = 16 << 20      # longest pcapng block read (Wireshark refuses far shorter packet blocks)
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


_AR4 = np.arange(4)
_AR16 = np.arange(16)
PAD = 128                    # zero bytes after each buffer so header gathers never overrun
#: Bytes in front of each read-ahead piece for what a chunk carries over from the one before
#: (a record, or a pcapng block, cut by the chunk's end); a longer carry is copied.
READ_ROOM = MAX_RECORD + 16


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
    (``.compressed_offset``: the byte of the compressed file where decoding stopped).

    Inflated by ISA-L (``isal.isal_zlib``) where it is installed, else by :mod:`zlib`
    (``fast=False`` asks for zlib: the reference). Where the decoder refuses a piece,
    zlib decides what is damage: it replays the member up to that piece, then decodes
    the piece byte by byte and keeps every byte before the one it refuses - so the bytes
    kept, the offset and the message are zlib's whichever decoder ran."""

    PIECE = 1 << 16                    # compressed bytes fed to the decoder at a time

    def __init__(self, path, fast: bool = True):
        self._path = path
        self._f = open(path, "rb")
        self._zlib = _isal_zlib if fast and _isal_zlib is not None else zlib
        self._d = self._zlib.decompressobj(31)
        self._member_start = 0         # compressed byte where the current member begins
        self._member_fed = False       # bytes of the current member given to the decoder
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
                self._d = self._zlib.decompressobj(31)
                self._member_start, self._member_fed = self._in, False
            try:
                outs.append(self._d.decompress(piece))
                rest = self._d.unused_data if self._d.eof else b""
            except self._zlib.error:
                rest = self._decode_to_damage(piece, outs)
                if rest is None:
                    break
            self._member_fed = True
            self._in += len(piece) - len(rest)
            piece = rest
        return b"".join(outs)

    def _decode_to_damage(self, piece, outs):
        """zlib's decision on ``piece`` (starting at compressed byte ``self._in``), which the
        decoder refused: a zlib decoder replays the member up to the piece (its output was
        given already), then decodes the piece byte by byte into ``outs``. Returns None with
        the damage set at the first byte zlib refuses; else the piece's bytes after the
        member's end (zlib took them all: zlib decodes the rest of the stream)."""
        d = zlib.decompressobj(31)
        with open(self._path, "rb") as f:
            f.seek(self._member_start)
            left = self._in - self._member_start
            while left > 0:
                block = f.read(min(left, 1 << 20))
                if not block:
                    break
                left -= len(block)
                d.decompress(block)
        self._d, self._zlib = d, zlib
        for i in range(len(piece)):
            try:
                outs.append(d.decompress(piece[i:i + 1]))
            except zlib.error as exc:
                self._in += i
                self._stop(f"corrupt compressed data ({exc}) at compressed byte {self._in}")
                return None
            if d.eof:
                return piece[i + 1:]
        return b""


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


class _ReadAhead:
    """The file read ahead of its consumer, on a thread of its own: pieces of ``size`` bytes,
    each read at offset ``room`` of a buffer of ``room + size + PAD`` bytes, at most
    ``depth`` waiting. A file's ``readinto`` (and zlib's inflate, for a gzip stream) runs
    without the GIL, so the next piece is read while the caller walks and decodes this
    one; the ``room`` in front takes the bytes a caller carries over from the previous
    piece without a copy of the piece. ``recycle=True``: buffers go back to the thread
    when the caller asks for the next piece (a caller done with each piece by then, as
    :class:`CaptureReader`'s ``reuse_buffer`` promises), so ``depth + 1`` buffers serve
    the whole file (with ``depth`` 1: the one the caller holds and the one being read).

    :meth:`get` returns ``(buffer, bytes read, exception)``: a piece shorter than ``size``
    is the last, and an exception the file's read raised comes with the bytes read
    before it, after every piece before it, in the order a direct read would have met it."""

    def __init__(self, f, size: int, room: int, *, depth: int = 1, recycle: bool = False):
        import queue
        import threading
        self.f, self.size, self.room, self.recycle = f, size, room, recycle
        self._ready = queue.Queue(maxsize=depth)
        self._free = queue.Queue()
        if recycle:          # made here: the caller's heap, not a new arena of the thread's
            for _ in range(depth + 1):
                self._free.put(np.empty(room + size + PAD, np.uint8))
        self._stop = threading.Event()
        self._held = None
        self._done = False
        self._thread = threading.Thread(target=self._run, name="airlink-capture-read", daemon=True)
        self._thread.start()

    def _buffer(self):
        """A buffer to read the next piece into (None: stopped). Recycling, one of the
        ``depth + 1`` made at the start: the thread waits for the caller to give one back."""
        import queue
        if not self.recycle:
            return np.empty(self.room + self.size + PAD, np.uint8)
        while not self._stop.is_set():
            try:
                return self._free.get(timeout=0.05)
            except queue.Empty:
                continue
        return None

    def _run(self) -> None:
        import queue
        while not self._stop.is_set():
            buf = self._buffer()
            if buf is None:
                return
            view = memoryview(buf)[self.room:self.room + self.size]
            got, exc = 0, None
            try:
                while got < self.size:
                    k = self.f.readinto(view[got:])
                    if not k:
                        break
                    got += k
            except BaseException as e:          # handed to the caller, in order
                exc = e
            del view
            item = (buf, got, exc)
            while not self._stop.is_set():
                try:
                    self._ready.put(item, timeout=0.05)
                    break
                except queue.Full:
                    continue
            if exc is not None or got < self.size:
                return

    def get(self):
        """The next piece: ``(buffer, bytes read, exception or None)``; after the last,
        ``(None, 0, None)``."""
        if self._held is not None and self.recycle:
            self._free.put(self._held)
        self._held = None
        if self._done:
            return None, 0, None
        buf, got, exc = self._ready.get()
        if exc is not None or got < self.size:
            self._done = True
        self._held = buf
        return buf, got, exc

    def close(self) -> None:
        """Stop the thread (it may be waiting to hand over a piece) and wait for it."""
        import queue
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._ready.get(timeout=0.05)
            except queue.Empty:
                pass
        self._held = None


class CaptureReader:
    """Iterate over :class:`RecordBatch` es of a pcap, pcapng or gzip-compressed capture."""

    def __init__(self, path, *, salvage: bool = False, chunk: int = CHUNK, progress=None,
                 reuse_buffer: bool = False):
        """``reuse_buffer=True``: classic-pcap batches share one buffer, overwritten by the
        next batch - for consumers that are done with a batch before asking for the next
        (saves a fresh batch buffer, and its page faults, per batch)."""
        self.path = Path(path)
        self.reuse_buffer = reuse_buffer
        self._ahead = None             # the file's read-ahead (_fill), while a pass runs
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
        self._sections = 0             # pcapng section headers seen
        self._drops = {}               # (section, interface) -> packets its capture tool dropped

    @property
    def dropped(self) -> int | None:
        """Packets the capture tool itself counted as dropped, from pcapng interface
        statistics blocks: per interface of each section the last block's ``isb_ifdrop``
        (dropped by the interface or driver) plus ``isb_osdrop`` (by the OS: the capture
        buffer full - tcpdump's "dropped by kernel"), summed. None: no such counter in the
        file (a classic pcap keeps none)."""
        return sum(self._drops.values()) if self._drops else None

    # -- errors -----------------------------------------------------------------
    def _fail(self, what, offset, packet=None, where=None):
        """Report damage at byte ``offset`` of the (uncompressed) capture; ``where`` is
        put before the packet number, e.g. a block's type and length."""
        pk = self.packets + 1 if packet is None else packet
        if self._damage is not None:   # what follows compressed-stream damage is its consequence
            what = f"{self._damage}: {what}"
        where = f"{where}; " if where else ""
        msg = (f"{self.name}: {what} at byte {offset} ({where}packet {pk}); "
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
            if self._ahead is not None:
                self._ahead.close()
                self._ahead = None
            f.close()

    def _fill(self, f, carry: bytes, size: int):
        """The next chunk's buffer: ``carry`` (bytes left over from the previous chunk), then
        at least ``size`` bytes of the file (fewer at its end), then ``PAD`` zero bytes.
        Returns ``(block, bytes read)``. The file is read ahead by :class:`_ReadAhead` in
        pieces of ``self.chunk`` bytes: where the carry fits in front of the next piece and
        ``size`` is one piece (every classic-pcap chunk, nearly every pcapng one) the
        block is that piece's own buffer; otherwise (a block longer than a piece) the
        pieces are joined in a new one. Numpy buffers, not bytearrays: numpy asks for
        transparent huge pages on large allocations, so filling one costs a few page faults
        instead of one per 4 KiB. With ``reuse_buffer`` the buffers go round (the consumer
        is done with a chunk when it asks for the next)."""
        if self._ahead is None:
            self._ahead = _ReadAhead(f, self.chunk, READ_ROOM, recycle=self.reuse_buffer)
        if len(carry) <= READ_ROOM and size <= self.chunk:
            buf, got = self._piece(len(carry))
            if buf is None:
                buf, got = np.empty(READ_ROOM + PAD, np.uint8), 0
            start = READ_ROOM - len(carry)
            buf[start:READ_ROOM] = np.frombuffer(carry, np.uint8)
            block = buf[start:READ_ROOM + got + PAD]
        else:
            parts, got = [np.frombuffer(carry, np.uint8)], 0
            while got < size:
                buf, k = self._piece(len(carry) + got)
                if buf is None:
                    break
                parts.append(buf[READ_ROOM:READ_ROOM + k].copy())
                got += k
                if k < self.chunk or self._damage is not None or self.problem is not None:
                    break
            block = np.empty(len(carry) + got + PAD, np.uint8)
            block[:len(carry) + got] = np.concatenate(parts)
        block[len(carry) + got:] = 0
        return block, got

    def _piece(self, before: int = 0):
        """The read-ahead's next piece ``(buffer, bytes)`` (``(None, 0)`` past the end); a
        read that failed counts as it would have read directly: the bytes before the
        failure are kept, gzip damage is reported after them, other errors at once, at the
        file byte reached (this chunk's start, its ``before`` bytes taken already - the
        carry, earlier pieces - and the piece's)."""
        buf, got, exc = self._ahead.get()
        if isinstance(exc, GzipDamage):           # the bytes before it are kept and parsed first
            self._damage = f"compressed data is damaged: {exc}"
        elif isinstance(exc, Exception):          # OSError, EOFError, BadGzipFile, zlib.error, ...
            self._fail(f"compressed data is damaged ({type(exc).__name__}: {exc})",
                       self._consumed + before + got)
        elif exc is not None:
            raise exc
        return buf, got

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
            block, got = self._fill(f, carry, self.chunk)
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
        self._mask = self._walk_out = None   # the reused buffers are not needed any more

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
        """Read in chunks like pcap: each chunk holds the bytes carried over (a block cut by the
        chunk's end), then the file data. Runs of packet blocks are walked in C
        (``_records.walk_ng``) or by :meth:`_ng_walk`, its Python twin; every other block
        (section header, interface description, anything unknown) and every damaged one goes
        to :meth:`_ng_block`. Memory follows the chunk (and the largest block, at most
        ``NG_MAX_BLOCK``), not the file."""
        self._consumed = 0
        self.endian = None
        self._ifaces = []                  # this section's: (link type, mult, div, offset ns)
        self._iface_arr = np.zeros(0, np.int64)
        carry = head
        want = 0                           # bytes the block at the start of carry needs
        eof = False
        while not eof and self.problem is None:
            block, got = self._fill(f, carry, max(self.chunk, want - len(carry)))
            if not got or self._damage is not None:
                eof = True
            n = len(carry) + got
            if n == 0:
                break
            first = self.packets + 1
            stop, runs, want = self._ng_chunk(block, n)
            if runs:
                cols = [np.concatenate([r[k] for r in runs]) if len(runs) > 1 else runs[0][k]
                        for k in range(6)]
                yield RecordBatch(block, cols[0], cols[1], cols[2], cols[3], cols[4].astype(np.int32),
                                  np.minimum(cols[5], 255).astype(np.uint8), first)
                del cols
            del runs
            self._consumed += stop
            carry = bytes(memoryview(block)[stop:n])
            if self.progress:
                self.progress(self._consumed)
            if eof and carry and self.problem is None:
                self._fail("truncated block header" if len(carry) < 12 else "truncated block",
                           self._consumed)
        if self._damage is not None and self.problem is None:
            self._fail("end of the data", self._consumed)
        self._walk_out = None

    def _ng_chunk(self, buf, n):
        """Walk the blocks of buf[:n]: (offset where reading continues, record runs, bytes
        the block there needs to be whole)."""
        raw = memoryview(buf)[:n]
        p, runs = 0, []
        while self.problem is None:
            if self.endian is not None and self._ifaces:
                if _records is not None:
                    need = (n - p) // 16 + 1
                    if self._walk_out is None or len(self._walk_out[0]) < need:
                        self._walk_out = [np.empty(need, np.int64) for _ in range(6)]
                    count, stop, status = _records.walk_ng(buf, p, n, self.endian == "<",
                                                           self._iface_arr, *self._walk_out)
                    run = tuple(a[:count].copy() for a in self._walk_out)
                else:
                    run, stop, status, _ = self._ng_walk(raw, p, n)
                if len(run[0]):
                    runs.append(run)
                    self.packets += len(run[0])
                p = stop
                if status == 0:
                    break
            if p + 12 > n:
                break
            q = self._ng_block(raw, p, n)
            if q is None:                  # reported (salvage) or incomplete
                break
            p = q
        want = 0
        if self.problem is None and p + 8 <= n:
            want = self._ng_length(raw, p)
        return p, runs, want

    def _ng_length(self, raw, p):
        """The total length of the block at p (a section header's in its own byte order)."""
        e = self.endian or "<"
        if raw[p:p + 4] == PCAPNG_MAGIC and p + 12 <= len(raw):
            e = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}.get(bytes(raw[p + 8:p + 12]), e)
        return struct.unpack_from(e + "I", raw, p + 4)[0]

    def _ng_walk(self, raw, start, n):
        """The packet-block walk of ``_records.walk_ng`` in Python: from ``start``, enhanced
        (6), simple (3) and obsolete (2) packet blocks of the current section, with the same
        checks in the same order. Returns (arrays: data offset, captured and original
        length, time ns, link type, interface; stop; status 0 = end of the data or a block
        not wholly in raw[:n], 1 = a block that is not a packet block or is damaged at
        stop; the damage, or None)."""
        e, ifaces = self.endian, self._ifaces
        u32 = struct.Struct(e + "I").unpack_from
        head = struct.Struct(e + "IIIIIII").unpack_from
        cols = ([], [], [], [], [], [])
        p, status, why = start, 0, None
        while p + 12 <= n:
            btype, blen = struct.unpack_from(e + "II", raw, p)
            if blen < 12 or blen % 4 or blen > NG_MAX_BLOCK:
                status, why = 1, f"impossible block length {blen}"
                break
            if p + blen > n:
                break
            if btype not in (6, 3, 2):
                status = 1
                break
            if u32(raw, p + blen - 4)[0] != blen:
                status, why = 1, f"the length at its end is {u32(raw, p + blen - 4)[0]}"
                break
            ticks = 0
            if btype == 3:                                 # simple: interface 0, no time
                if blen < 16 or not ifaces:
                    status, why = 1, ("too short for a simple packet block" if blen < 16 else
                                      "packet refers to undeclared interface 0")
                    break
                iid, orig = 0, u32(raw, p + 8)[0]
                cap, data = min(orig, blen - 16), 12
            else:
                if blen < 32:
                    status, why = 1, "too short for a packet block"
                    break
                _, _, iid, th, tl, cap, orig = head(raw, p)
                if btype == 2:                             # 16-bit interface id, 16-bit drops
                    iid = struct.unpack_from(e + "H", raw, p + 8)[0]
                ticks, data = (th << 32) | tl, 28
                if iid >= len(ifaces) or cap + 32 > blen:
                    status, why = 1, (f"packet refers to undeclared interface {iid}" if iid >= len(ifaces)
                                      else f"captured length {cap} runs past the block's end")
                    break
            lt, mult, div, off = ifaces[iid]
            t = ticks * mult // div
            if t >= 1 << 62 or not 0 <= t + off < 1 << 62:
                status, why = 1, f"impossible timestamp {ticks}"
                break
            for c, v in zip(cols, (p + data, cap, orig, 0 if btype == 3 else t + off, lt, iid)):
                c.append(v)
            p += blen
        return tuple(np.asarray(c, np.int64) for c in cols), p, status, why

    def _ng_block(self, raw, p, n):
        """One block that is not a run of good packet blocks, at p (p + 12 <= n): a section
        header (resets the interfaces), an interface description, a block to skip, or a
        damaged one (reported). Returns the offset after it, or None when reading stops
        there (damage reported, or the block is not wholly in raw[:n])."""
        if raw[p:p + 4] == PCAPNG_MAGIC:                   # section header: its own byte order
            bom = bytes(raw[p + 8:p + 12])
            endian = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}.get(bom)
            if endian is None:
                self._fail(f"bad pcapng byte-order magic {bom.hex()}", p + 8)
                return None
            blen = struct.unpack_from(endian + "I", raw, p + 4)[0]
            if blen < 28 or blen % 4 or blen > NG_MAX_BLOCK:
                self._damaged(p, 0x0A0D0D0A, blen, f"impossible block length {blen}")
                return None
            if p + blen > n:
                return None
            if struct.unpack_from(endian + "I", raw, p + blen - 4)[0] != blen:
                self._damaged(p, 0x0A0D0D0A, blen, "the length at its end differs")
                return None
            self.endian = endian
            self._set_ifaces([])
            self._sections += 1
            return p + blen
        if self.endian is None:
            self._fail("pcapng file does not start with a section header block", p)
            return None
        e = self.endian
        btype, blen = struct.unpack_from(e + "II", raw, p)
        if btype in (6, 3, 2) or blen < 12 or blen % 4 or blen > NG_MAX_BLOCK:
            if p + min(blen, NG_MAX_BLOCK) > n and not (blen < 12 or blen % 4 or blen > NG_MAX_BLOCK):
                return None
            why = self._ng_walk(raw, p, n)[3]
            self._damaged(p, btype, blen, why or "damaged")
            return None
        if p + blen > n:
            return None
        if struct.unpack_from(e + "I", raw, p + blen - 4)[0] != blen:
            self._damaged(p, btype, blen, "the length at its end differs")
            return None
        if btype == 1:                                     # interface description
            if blen < 20:
                self._damaged(p, btype, blen, "too short for an interface description")
                return None
            lt, _, _ = struct.unpack_from(e + "HHI", raw, p + 8)
            mult, div, off = 1000, 1, 0                    # default: microseconds
            for code, q, olen in _block_options(raw, e, p + 16, p + blen - 4):
                if q < 0:
                    self._damaged(p, btype, blen, f"option {code} runs past the block's end")
                    return None
                if code == 9 and olen >= 1:                # if_tsresol
                    r = raw[q]
                    x = r & 0x7F
                    if (r & 0x80 and x > 62) or (not r & 0x80 and x > 18):
                        self._damaged(p, btype, blen, f"unsupported timestamp resolution byte {r:#04x}")
                        return None
                    mult, div = ((10 ** 9, 2 ** x) if r & 0x80 else
                                 (10 ** (9 - x), 1) if x <= 9 else (1, 10 ** (x - 9)))
                elif code == 14 and olen >= 8:             # if_tsoffset: seconds added to every time
                    secs = struct.unpack_from(e + "q", raw, q)[0]
                    if abs(secs) >= 1 << 32:
                        self._damaged(p, btype, blen, f"impossible timestamp offset {secs}")
                        return None
                    off = secs * 10 ** 9
            self._set_ifaces(self._ifaces + [(lt, mult, div, off)])
            self.linktypes.add(lt)
        elif btype == 5 and blen >= 24:                    # interface statistics: the drop counters
            iid = struct.unpack_from(e + "I", raw, p + 8)[0]
            drops = []
            for code, q, olen in _block_options(raw, e, p + 20, p + blen - 4):
                if q < 0:                                  # a counter block is no reason to fail
                    break
                if code in (5, 7) and olen == 8:           # isb_ifdrop, isb_osdrop
                    drops.append(struct.unpack_from(e + "Q", raw, q)[0])
            if drops:                                      # cumulative: the last block counts
                self._drops[(self._sections, iid)] = sum(drops)
        return p + blen                                    # names, comments, unknown

    def _set_ifaces(self, ifaces):
        self._ifaces = ifaces
        self._iface_arr = np.asarray(ifaces, np.int64).reshape(-1, 4)

    def _damaged(self, p, btype, blen, why):
        self._fail("damaged block", self._consumed + p,
                   where=f"block type {btype:#010x}, length {blen}: {why}")


def _block_options(raw, e: str, start: int, stop: int):
    """The options of a pcapng block (``e``: its byte order) from byte ``start`` up to
    ``stop`` (where the trailing block length begins): ``(code, value offset, length)`` each,
    until ``opt_endofopt`` or the end; an option whose value runs past ``stop`` comes as
    ``(code, -1, length)`` and ends the walk. Values are padded to 32 bits."""
    q = start
    while q + 4 <= stop:
        code, olen = struct.unpack_from(e + "HH", raw, q)
        if code == 0:
            return
        if q + 4 + olen > stop:
            yield code, -1, olen
            return
        yield code, q + 4, olen
        q += 4 + ((olen + 3) & ~3)


def progress_bar(path: Path, enabled):
    """(tqdm bar, update(bytes done)) for reading ``path``, or (None, None): only files over
    64 MB read with ``enabled`` and stderr a terminal show one."""
    size = file_size(path)
    import sys
    if not enabled or size < (64 << 20) or not sys.stderr.isatty():
        return None, None
    from tqdm import tqdm
    bar = tqdm(total=size, unit="B", unit_scale=True, desc=path.name, leave=False)
    state = {"done": 0}

    def update(done):
        done = min(done, size)
        bar.update(done - state["done"])
        state["done"] = done
    return bar, update
