"""``airlink record``: measure a path the way CellReplay's recorder does, write its traces.

Two programs talk over one port number: a TCP connection for commands and results, UDP
for everything measured. :class:`RecordServer` (``airlink record --serve``) runs where the
user's server is; :class:`Recorder` (``airlink record HOST``) runs on the measured side
(a phone's interface, inside a shell) and drives four phases, one after the other:

1. **light** - every ``train_gap_ms`` a slot: a small probe (``PROBE_BYTES`` IP bytes) that
   the server echoes gives the base delay, ``round-trip / 2`` (integer ms, as CellReplay's
   trace processor writes it); half a slot later a train of ``n`` packets of
   ``PDO_BYTES`` goes up back to back, and the server answers its first packet with a
   train of ``n`` down. A train's delivery opportunities are its packets' arrival times
   after the first one's (integer ms, truncated), in arrival order. ``n`` cycles through
   ``train_packets``. A slot whose probe or train's first packet was lost is left out, as
   CellReplay's processor leaves out trains missing in either direction.
2. **size offset** - echo probes of 100, 200, ..., 1400 bytes at idle gaps; the offset of
   size ``s`` is ``(median RTT(s) - median RTT(100)) / 2`` ms, the same for both
   directions (an echo measures the round trip; it is split evenly).
3. **heavy downlink** - the server saturates the path with ``PDO_BYTES`` packets for
   ``seconds``; each arrival is one delivery opportunity at ``(t - t_first) // 1 ms``.
   The sender keeps at most ``window`` packets in flight (receiver feedback every
   ``FEEDBACK_MS``), ``window = max(WINDOW_MIN, 4 x packets delivered in the last 100 ms)``:
   the bottleneck queue never runs dry while the rate is under twice the last 100 ms's,
   and holds less than ~400 ms of it, so it drains soon after.
4. **heavy uplink** - the same, the recorder sending.

The heavy trace is the CellReplay heavy PDO trace as it is; the Mahimahi saturator trace is
the same arrivals as bytes per millisecond written with 1500-byte opportunities by the
running reserve of :func:`airlink.traces.mahimahi.format_trace`. Light and heavy phases are
measured one after the other (CellReplay records them on two phones at once).

Arrival times are the kernel's receive timestamps (``SO_TIMESTAMPNS``), sends are stamped
just before ``send``; all times are on each side's wall clock (the kernel's stamps are), and
only differences on one side's clock are used.

A recording that is interrupted (Ctrl-C) or loses its peer (no answer for ``peer_timeout_s``)
ends with what it has: every file whose data is whole is written, ``record.json`` says
``"complete": false`` and why.
"""
from __future__ import annotations

import json
import selectors
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from airlink.traces.cellreplay import PDO_BYTES
from airlink.core.errors import AirlinkError

PROBE_BYTES = 100
#: IPv4 + UDP header bytes: a packet of ``size`` IP bytes carries ``size - 28`` bytes of UDP payload.
IP_UDP_BYTES = 28
FEEDBACK_MS = 10
WINDOW_MIN = 64
#: a saturating sender whose window is full and whose receiver has acknowledged nothing new
#: for this long writes what is outstanding off as lost (:class:`_Window`), ns
WINDOW_STALL_NS = 1_000_000_000
DEFAULT_PORT = 9050
OFFSET_SIZES = tuple(range(100, PDO_BYTES + 1, 100))

_HDR = struct.Struct("!4sBIIIQ")       # magic, kind, train/slot, seq, n/count, sender's ns
_MAGIC = b"ALRC"
HELLO, DATA, FEEDBACK, TRAIN, DOWN_TRAIN, ECHO, ECHO_REPLY = range(1, 8)
SUMMARY_NAME = "record.json"
MAHIMAHI_NAMES = {"down": "mahimahi.down", "up": "mahimahi.up"}


class PeerLost(AirlinkError):
    """The other side stopped answering."""


def _packet(kind: int, slot: int, seq: int, n: int, ns: int, size: int) -> bytes:
    head = _HDR.pack(_MAGIC, kind, slot, seq, n, ns)
    return head + bytes(max(0, size - IP_UDP_BYTES - len(head)))


#: Linux's SO_TIMESTAMPNS (the socket module does not name it): the kernel stamps each
#: datagram with its arrival time (CLOCK_REALTIME, ns), so a process that is descheduled
#: does not compress the arrival times it reads late.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
#: The clock of every time a recording takes: the one the kernel stamps arrivals with.
_now = time.time_ns


def _stamping(sock: socket.socket) -> socket.socket:
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        pass                     # no kernel stamps: arrivals are stamped when read
    return sock


def _recv(sock: socket.socket):
    """``(data, addr, arrival_ns)`` of one datagram (raises BlockingIOError when none)."""
    data, anc, _, addr = sock.recvmsg(65536, 64)
    for level, kind, value in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(value)
            return data, addr, sec * 1_000_000_000 + nsec
    return data, addr, _now()


def _parse(data: bytes):
    if len(data) < _HDR.size or data[:4] != _MAGIC:
        return None
    return _HDR.unpack_from(data)[1:]


def _send(sock, data, addr=None) -> bool:
    try:
        sock.send(data) if addr is None else sock.sendto(data, addr)
        return True
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:           # no route yet, a refused port: as lost on the path
        return False


class _Window:
    """In-flight limit of a saturating sender from the receiver's cumulative counts.

    The receiver reports how many packets it has got so far (:meth:`feedback`); the limit
    is four times what it got in the last ~100 ms, at least :data:`WINDOW_MIN`. A lost
    packet is never counted, so ``sent - acked`` keeps every loss "in flight": once the
    losses of a long phase add up to the limit (a cell whose rate swings can drop part of
    a window), the sender would stop for good and the receiver, getting nothing, would
    send no feedback to restart it. So when the window is full and nothing new was
    acknowledged for :data:`WINDOW_STALL_NS`, what is outstanding then is written off as
    lost (``lost``): in flight = ``max(0, sent - acked - lost)``."""

    def __init__(self):
        self.sent = 0
        self.acked = 0
        self.lost = 0
        self.history = []     # (ns, acked)
        self.progress_ns = None   # when acked last grew (or the first room() call)

    def feedback(self, now: int, count: int):
        if count > self.acked:
            self.acked = count
            self.progress_ns = now
        self.history.append((now, self.acked))
        cut = now - 100_000_000
        while len(self.history) > 2 and self.history[1][0] <= cut:
            self.history.pop(0)

    def limit(self) -> int:
        recent = self.acked - self.history[0][1] if self.history else 0
        return max(WINDOW_MIN, 4 * recent)

    def in_flight(self) -> int:
        return max(0, self.sent - self.acked - self.lost)

    def room(self, now: int) -> int:
        """Packets the sender may send at ``now`` (ns)."""
        if self.progress_ns is None:
            self.progress_ns = now
        free = self.limit() - self.in_flight()
        if free <= 0 and now - self.progress_ns > WINDOW_STALL_NS:
            self.lost = self.sent - self.acked
            self.progress_ns = now
            free = self.limit()
        return free


class _Control:
    """JSON lines over the TCP connection."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def send(self, obj):
        self.sock.settimeout(30.0)         # a report may exceed the socket buffer
        try:
            self.sock.sendall(json.dumps(obj).encode() + b"\n")
        finally:
            self.sock.setblocking(False)

    def poll(self):
        """Messages complete so far (non-blocking); None when the peer closed."""
        try:
            chunk = self.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            chunk = b"-"
        except OSError:
            return None
        if not chunk:
            return None
        if chunk != b"-":
            self.buf += chunk
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            out.append(json.loads(line))
        return out


# ---------------------------------------------------------------------------- server

class RecordServer:
    """The far side of a recording: echoes probes, answers trains, saturates the downlink
    on request, and reports what arrived from the recorder. One recorder at a time."""

    def __init__(self, host: str = "0.0.0.0", port: int = DEFAULT_PORT, *, log=None):
        self.host, self.port = host, port
        self.log = log or (lambda text: None)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.udp = _stamping(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        self.udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        try:
            self.tcp.bind((host, port))
            self.udp.bind((host, port))
        except OSError as exc:
            raise AirlinkError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self.tcp.listen(1)
        self.udp.setblocking(False)

    def serve_forever(self):
        self.log(f"serving on {self.host}:{self.port} (tcp and udp)")
        while True:
            conn, addr = self.tcp.accept()
            self.log(f"recorder {addr[0]} connected")
            try:
                self._session(conn)
            except (OSError, ValueError) as exc:
                self.log(f"session ended: {exc}")
            finally:
                conn.close()
            self.log("recorder gone")

    def _session(self, conn):
        conn.setblocking(False)
        ctl = _Control(conn)
        peer = None
        up_data, up_trains = [], {}
        fb_last = 0
        sat = None                      # {"end": ns, "size": int, "window": _Window}
        sel = selectors.DefaultSelector()
        sel.register(conn, selectors.EVENT_READ, "tcp")
        sel.register(self.udp, selectors.EVENT_READ, "udp")
        try:
            while True:
                now = _now()
                if sat is not None:
                    if now >= sat["end"]:
                        ctl.send({"done": "saturate_down", "sent": sat["window"].sent})
                        sat = None
                    else:
                        w = sat["window"]
                        for _ in range(min(32, w.room(now))):
                            if not _send(self.udp, _packet(DATA, 0, w.sent, 0, now, sat["size"]), peer):
                                break
                            w.sent += 1
                timeout = 0.0005 if sat is not None else 0.2
                for key, _ in sel.select(timeout):
                    if key.data == "udp":
                        while True:
                            try:
                                data, addr, now = _recv(self.udp)
                            except (BlockingIOError, InterruptedError):
                                break
                            msg = _parse(data)
                            if msg is None:
                                continue
                            kind, slot, seq, n, ns = msg
                            if kind == HELLO:
                                peer = addr
                                _send(self.udp, _packet(HELLO, 0, 0, 0, ns, PROBE_BYTES), addr)
                            elif kind == ECHO:
                                _send(self.udp, _packet(ECHO_REPLY, slot, seq, 0, ns, len(data) + IP_UDP_BYTES), addr)
                            elif kind == TRAIN:
                                up_trains.setdefault(slot, []).append((seq, now))
                                if seq == 0:
                                    for k in range(n):
                                        _send(self.udp, _packet(DOWN_TRAIN, slot, k, n, now, PDO_BYTES), addr)
                            elif kind == DATA:
                                up_data.append(now)
                                if now - fb_last >= FEEDBACK_MS * 1_000_000:
                                    fb_last = now
                                    _send(self.udp, _packet(FEEDBACK, 0, 0, len(up_data), now, PROBE_BYTES), addr)
                            elif kind == FEEDBACK and sat is not None:
                                sat["window"].feedback(now, n)
                    else:
                        msgs = ctl.poll()
                        if msgs is None:
                            return
                        for m in msgs:
                            cmd = m.get("cmd")
                            if cmd == "hello":
                                ctl.send({"hello": True, "udp_seen": peer is not None})
                            elif cmd == "saturate_down":
                                if peer is None:
                                    ctl.send({"error": "no UDP from the recorder yet"})
                                    continue
                                sat = {"end": _now() + int(m["seconds"] * 1e9),
                                       "size": int(m.get("size", PDO_BYTES)), "window": _Window()}
                            elif cmd == "report":
                                if up_data:     # the last count, so the sender's window closes
                                    _send(self.udp, _packet(FEEDBACK, 0, 0, len(up_data), now, PROBE_BYTES), peer)
                                ctl.send({"report": True, "up_data_ns": up_data,
                                          "up_trains": {str(k): v for k, v in up_trains.items()}})
                                up_data, up_trains = [], {}
                            elif cmd == "bye":
                                return
        finally:
            sel.close()


# ---------------------------------------------------------------------------- recorder

@dataclass
class Recording:
    """What a recording measured (raw ns on each side's own wall clock)."""
    slots: list = field(default_factory=list)        # dicts: probe_send, probe_back, train_send, n, down_ns
    up_trains: dict = field(default_factory=dict)    # slot -> [(seq, ns)] at the server
    offset_rtts: dict = field(default_factory=dict)  # size -> [rtt ns]
    down_ns: list = field(default_factory=list)      # heavy downlink arrivals (recorder)
    up_ns: list = field(default_factory=list)        # heavy uplink arrivals (server)
    phases_done: list = field(default_factory=list)
    incomplete: str | None = None


class Recorder:
    """Drive a recording against a :class:`RecordServer` at ``host:port``.

    ``seconds`` is the length of the light phase (one slot more) and of each heavy phase; ``train_packets``
    the train lengths, cycled slot by slot; ``train_gap_ms`` the spacing of slots (the idle
    time before each train is about half of it); ``offset_probes`` the probes per size.
    """

    PHASES = ("light", "size offset", "heavy downlink", "heavy uplink")

    def __init__(self, host: str, port: int = DEFAULT_PORT, *, seconds: float = 10.0,
                 train_packets=(10, 40), train_gap_ms: float = 200.0, offset_probes: int = 5,
                 peer_timeout_s: float = 5.0, progress=None):
        if seconds <= 0:
            raise AirlinkError(f"recording length must be positive, got {seconds:g} s")
        if not train_packets or min(train_packets) < 1:
            raise AirlinkError("train lengths must be positive packet counts")
        if train_gap_ms <= 0:
            raise AirlinkError(f"train gap must be positive, got {train_gap_ms:g} ms")
        self.host, self.port, self.seconds = host, port, float(seconds)
        self.train_packets = tuple(int(n) for n in train_packets)
        self.train_gap_ms = float(train_gap_ms)
        self.offset_probes = int(offset_probes)
        self.peer_timeout_ns = int(peer_timeout_s * 1e9)
        self.progress = progress or (lambda text: None)
        self.rec = Recording()

    # -- connection
    def _connect(self):
        try:
            self.tcp = socket.create_connection((self.host, self.port), timeout=self.peer_timeout_ns / 1e9)
        except OSError as exc:
            raise PeerLost(f"cannot reach the record server at {self.host}:{self.port}: "
                           f"{exc.strerror or exc}") from None
        self.tcp.setblocking(False)
        self.ctl = _Control(self.tcp)
        self.udp = _stamping(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        self.udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.udp.connect((self.host, self.port))
        self.udp.setblocking(False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.tcp, selectors.EVENT_READ, "tcp")
        self.sel.register(self.udp, selectors.EVENT_READ, "udp")
        deadline = _now() + self.peer_timeout_ns
        while _now() < deadline:
            _send(self.udp, _packet(HELLO, 0, 0, 0, _now(), PROBE_BYTES))
            self.ctl.send({"cmd": "hello"})
            reply = self._wait_control(lambda m: "hello" in m, timeout_ns=300_000_000, quiet=True)
            if reply is not None and reply.get("udp_seen"):
                return
        raise PeerLost(f"the record server at {self.host}:{self.port} does not see our UDP packets")

    def _pump(self, timeout_s: float, on_udp):
        """Wait up to ``timeout_s`` for packets; call ``on_udp(msg, ns, size)`` for each;
        returns control messages that arrived (raises PeerLost when the server closed)."""
        ctl = []
        for key, _ in self.sel.select(max(0.0, timeout_s)):
            if key.data == "udp":
                while True:
                    try:
                        data, _, arrival = _recv(self.udp)
                    except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                        break
                    msg = _parse(data)
                    if msg is not None:
                        on_udp(msg, arrival, len(data) + IP_UDP_BYTES)
            else:
                msgs = self.ctl.poll()
                if msgs is None:
                    raise PeerLost("the record server closed the connection")
                ctl += msgs
        return ctl

    def _wait_control(self, want, *, timeout_ns=None, on_udp=None, quiet=False):
        deadline = _now() + (timeout_ns or self.peer_timeout_ns)
        while _now() < deadline:
            for m in self._pump(0.05, on_udp or (lambda *a: None)):
                if want(m):
                    return m
        if quiet:
            return None
        raise PeerLost(f"no answer from the record server for {self.peer_timeout_ns / 1e9:g} s")

    def _report(self):
        self.ctl.send({"cmd": "report"})
        m = self._wait_control(lambda m: "report" in m)
        return m

    # -- phases
    def _light(self):
        gap = int(self.train_gap_ms * 1e6)
        # one slot past the phase's length: the last train plus its gap then covers the heavy
        # trace (a replay refuses a light trace that ends before the heavy one) whatever the
        # timing of the first slot
        n_slots = int(self.seconds * 1000 // self.train_gap_ms) + 1
        t0 = _now()
        slots = self.rec.slots
        last_heard = t0

        def on_udp(msg, ns, size):
            nonlocal last_heard
            kind, slot, seq, n, sent = msg
            if slot >= len(slots):
                return
            last_heard = ns
            if kind == ECHO_REPLY:
                slots[slot]["probe_back"] = ns
            elif kind == DOWN_TRAIN:
                slots[slot]["down"].append((seq, ns))

        for k in range(n_slots):
            start = t0 + k * gap
            n = self.train_packets[k % len(self.train_packets)]
            slots.append({"probe_send": None, "probe_back": None, "train_send": None, "n": n, "down": []})
            while _now() < start:
                self._pump((start - _now()) / 1e9, on_udp)
            now = _now()
            slots[k]["probe_send"] = now
            _send(self.udp, _packet(ECHO, k, 0, 0, now, PROBE_BYTES))
            mid = start + gap // 2
            while _now() < mid:
                self._pump((mid - _now()) / 1e9, on_udp)
            now = _now()
            slots[k]["train_send"] = now
            for seq in range(n):
                _send(self.udp, _packet(TRAIN, k, seq, n, now, PDO_BYTES))
            if _now() - last_heard > self.peer_timeout_ns:
                raise PeerLost(f"no packet from the record server for {self.peer_timeout_ns / 1e9:g} s")
            if k % max(1, int(1000 / self.train_gap_ms)) == 0:
                self.progress(f"light: {k}/{n_slots} trains")
        end = _now() + gap
        while _now() < end:
            self._pump((end - _now()) / 1e9, on_udp)
        rep = self._report()
        self.rec.up_trains = {int(k): v for k, v in rep["up_trains"].items()}

    def _offsets(self):
        sent = {}
        rtts = self.rec.offset_rtts

        def on_udp(msg, ns, size):
            kind, slot, seq, n, t = msg
            if kind == ECHO_REPLY and (slot, seq) in sent:
                rtts.setdefault(sent.pop((slot, seq)), []).append(ns - t)

        gap = 20_000_000
        for r in range(self.offset_probes):
            for size in OFFSET_SIZES:
                now = _now()
                sent[(1_000_000 + r, size)] = size
                _send(self.udp, _packet(ECHO, 1_000_000 + r, size, 0, now, size))
                end = now + gap
                while _now() < end:
                    self._pump((end - _now()) / 1e9, on_udp)
        end = _now() + 200_000_000
        while _now() < end:
            self._pump((end - _now()) / 1e9, on_udp)

    def _heavy_down(self):
        arrivals = self.rec.down_ns
        fb = {"last": 0}

        def on_udp(msg, ns, size):
            if msg[0] == DATA:
                arrivals.append(ns)
                if ns - fb["last"] >= FEEDBACK_MS * 1_000_000:
                    fb["last"] = ns
                    _send(self.udp, _packet(FEEDBACK, 0, 0, len(arrivals), ns, PROBE_BYTES))

        self.ctl.send({"cmd": "saturate_down", "seconds": self.seconds, "size": PDO_BYTES})
        done = False
        t_end = _now() + int(self.seconds * 1e9)
        shown = 0
        while not done:
            for m in self._pump(0.05, on_udp):
                if m.get("done") == "saturate_down":
                    done = True
                elif "error" in m:
                    raise PeerLost(f"the record server refused: {m['error']}")
            now = _now()
            if now - (arrivals[-1] if arrivals else t_end - int(self.seconds * 1e9)) > self.peer_timeout_ns:
                raise PeerLost(f"no packet from the record server for {self.peer_timeout_ns / 1e9:g} s")
            if now - shown > 1e9:
                shown = now
                self.progress(f"heavy downlink: {len(arrivals)} packets")
        self._drain(on_udp, lambda: arrivals[-1] if arrivals else 0)

    def _drain(self, on_udp, last_arrival):
        """Keep receiving until 300 ms pass without a packet (the queue has drained)."""
        end = _now() + self.peer_timeout_ns
        while _now() < end:
            self._pump(0.05, on_udp)
            if _now() - last_arrival() > 300_000_000:
                break

    def _heavy_up(self):
        w = _Window()

        def on_udp(msg, ns, size):
            if msg[0] == FEEDBACK:
                w.feedback(ns, msg[3])

        end = _now() + int(self.seconds * 1e9)
        shown = last_fb = _now()
        while True:
            now = _now()
            if now >= end:
                break
            for _ in range(min(32, w.room(now))):
                if not _send(self.udp, _packet(DATA, 0, w.sent, 0, now, PDO_BYTES)):
                    break
                w.sent += 1
            acked = w.acked
            self._pump(0.0005, on_udp)
            if w.acked != acked:
                last_fb = _now()
            elif _now() - last_fb > self.peer_timeout_ns:
                raise PeerLost(f"no feedback from the record server for {self.peer_timeout_ns / 1e9:g} s")
            if now - shown > 1e9:
                shown = now
                self.progress(f"heavy uplink: {w.acked} packets delivered")
        prev = {"acked": w.acked, "t": _now()}

        def last():
            if w.acked != prev["acked"]:
                prev.update(acked=w.acked, t=_now())
            return prev["t"]
        self._drain(on_udp, last)
        self.rec.up_ns = self._report()["up_data_ns"]

    def record(self) -> Recording:
        """Run the phases; on Ctrl-C or a lost peer, stop and keep what was measured."""
        steps = [self._light, self._offsets, self._heavy_down, self._heavy_up]
        try:
            self._connect()
            for i, (name, step) in enumerate(zip(self.PHASES, steps), 1):
                self.progress(f"[{i}/{len(steps)}] {name}")
                try:
                    step()
                finally:
                    if name == "light" and not self.rec.up_trains:
                        self._salvage_trains()
                self.rec.phases_done.append(name)
            try:
                self.ctl.send({"cmd": "bye"})
            except OSError:
                pass
        except KeyboardInterrupt:
            self.rec.incomplete = "interrupted"
        except PeerLost as exc:
            self.rec.incomplete = f"peer lost: {exc}"
        except OSError as exc:
            self.rec.incomplete = f"peer lost: {exc.strerror or exc}"
        return self.rec

    def _salvage_trains(self):
        """After an interrupted light phase, ask the server once for the uplink trains."""
        try:
            self.rec.up_trains = {int(k): v for k, v in self._report()["up_trains"].items()}
        except (PeerLost, OSError, KeyboardInterrupt, KeyError):
            pass


# ---------------------------------------------------------------------------- results

def light_trace(rec: Recording):
    """The up and down :class:`~airlink.traces.cellreplay.LightTrace` of the kept slots
    (None when fewer than three slots were measured in both directions)."""
    import numpy as np

    from airlink.traces.cellreplay import MIN_LIGHT_LINES, LightTrace
    rows = []
    for k, s in enumerate(rec.slots):
        up = rec.up_trains.get(k, [])
        if s["probe_back"] is None or s["train_send"] is None:
            continue
        if not any(q == 0 for q, _ in up) or not any(q == 0 for q, _ in s["down"]):
            continue
        base = (s["probe_back"] - s["probe_send"]) // 2 // 1_000_000
        pdos = []
        for arrivals in (up, s["down"]):
            t = sorted(ns for _, ns in arrivals)
            pdos.append(np.array([(x - t[0]) // 1_000_000 for x in t], dtype=np.int64))
        rows.append((s["train_send"], base, pdos[0], pdos[1]))
    if len(rows) < MIN_LIGHT_LINES:
        return None
    t0 = rows[0][0]
    times = np.array([(r[0] - t0) // 1_000_000 for r in rows], dtype=np.int64)
    delays = np.array([r[1] for r in rows], dtype=np.int64)
    return (LightTrace(times, delays, tuple(r[2] for r in rows)),
            LightTrace(times.copy(), delays.copy(), tuple(r[3] for r in rows)))


def heavy_trace(arrivals_ns, seconds: float):
    """Opportunity timestamps (ms after the first arrival, int64) of the arrivals in the
    first ``seconds``; None when fewer than two or all in the first millisecond."""
    import numpy as np
    if len(arrivals_ns) < 2:
        return None
    a = np.sort(np.asarray(arrivals_ns, dtype=np.int64))
    ms = (a - a[0]) // 1_000_000
    ms = ms[ms < seconds * 1000]
    return ms if ms.size >= 2 and ms[-1] > 0 else None


def saturator_trace(heavy_ms, packet_bytes: int = PDO_BYTES):
    """The capacity Trace (bytes per 1 ms) of a heavy trace's arrivals, each ``packet_bytes``."""
    import numpy as np

    from airlink.traces import Trace
    from fractions import Fraction
    counts = np.bincount(np.asarray(heavy_ms), minlength=int(heavy_ms[-1]) + 1)
    return Trace(counts.astype(np.float64) * packet_bytes, Fraction(1, 1000), ["1"], "bytes",
                 {"source": "airlink record", "format": "saturator"})


def size_offset(rec: Recording):
    """:class:`~airlink.traces.cellreplay.SizeOffset` from the echo RTTs (None when any size
    has no answer)."""
    import statistics
    from decimal import Decimal

    from airlink.traces.cellreplay import SizeOffset
    if any(not rec.offset_rtts.get(s) for s in OFFSET_SIZES):
        return None
    ref = statistics.median(rec.offset_rtts[OFFSET_SIZES[0]])
    offs = tuple(Decimal(f"{(statistics.median(rec.offset_rtts[s]) - ref) / 2 / 1e6:.3f}") for s in OFFSET_SIZES)
    offs = tuple(Decimal("0.000") if o == 0 else o for o in offs)     # no "-0.000"
    return SizeOffset(OFFSET_SIZES, offs)


def write_recording(rec: Recording, out, *, seconds: float, meta: dict | None = None) -> dict:
    """Write every whole part of ``rec`` into the folder ``out``: the CellReplay files
    (:data:`~airlink.traces.cellreplay.FILE_NAMES`), the Mahimahi saturator traces
    (``mahimahi.down``, ``mahimahi.up``) and ``record.json`` (summary, ``complete``).
    Returns the summary."""
    import numpy as np

    from airlink.traces import cellreplay as cr
    from airlink.core.atomic import write_text
    from airlink.traces.mahimahi import format_trace
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files, summary = {}, {"complete": rec.incomplete is None and len(rec.phases_done) == 4,
                          "incomplete": rec.incomplete, "phases_done": rec.phases_done,
                          "seconds": seconds, **(meta or {})}
    light = light_trace(rec)
    if light is not None:
        for d, lt in zip(("up", "down"), light):
            files[f"{d}_light"] = write_text(out / cr.FILE_NAMES[d, "light"], cr.format_light(lt))
        summary["trains"] = len(light[0])
        summary["base_delay_ms"] = {"median": float(np.median(light[0].base_delay_ms)),
                                    "min": int(light[0].base_delay_ms.min()),
                                    "max": int(light[0].base_delay_ms.max())}
    off = size_offset(rec)
    if off is not None:
        for d in ("up", "down"):
            files[f"{d}_offset"] = write_text(out / cr.FILE_NAMES[d, "offset"], cr.format_offset(off))
        summary["size_offset_ms"] = {str(s): float(o) for s, o in zip(off.size_bytes, off.offset_ms)}
    for d, arrivals in (("down", rec.down_ns), ("up", rec.up_ns)):
        heavy = heavy_trace(arrivals, seconds)
        if heavy is None:
            continue
        files[f"{d}_heavy"] = write_text(out / cr.FILE_NAMES[d, "heavy"], cr.format_heavy(heavy))
        files[f"{d}_mahimahi"] = write_text(out / MAHIMAHI_NAMES[d], format_trace(saturator_trace(heavy)))
        summary[f"{d}_rate_bps"] = heavy.size * PDO_BYTES * 8 / ((int(heavy[-1]) + 1) / 1000)
    if light is not None and all(f"{d}_heavy" in files for d in ("up", "down")):
        try:
            cr.check_set(cr.CellReplayTraces(
                cr.Direction(cr.parse_heavy(files["up_heavy"].read_text()), light[0], off),
                cr.Direction(cr.parse_heavy(files["down_heavy"].read_text()), light[1], off)),
                {k: str(out / n) for k, n in cr.FILE_NAMES.items()})
            summary["cellreplay_set"] = True
        except AirlinkError as exc:
            summary["cellreplay_set"] = False
            summary["cellreplay_set_problem"] = str(exc)
    else:
        summary["cellreplay_set"] = False
    summary["files"] = {k: str(v) for k, v in files.items()}
    write_text(out / SUMMARY_NAME, json.dumps(summary, indent=2) + "\n")
    return summary


def record(host: str, out, *, port: int = DEFAULT_PORT, seconds: float = 10.0,
           train_packets=(10, 40), train_gap_ms: float = 200.0, offset_probes: int = 5,
           peer_timeout_s: float = 5.0, progress=None) -> dict:
    """Record the path to the record server at ``host:port`` into the folder ``out``;
    returns the summary written to ``out/record.json`` (see :func:`write_recording`)."""
    r = Recorder(host, port, seconds=seconds, train_packets=train_packets, train_gap_ms=train_gap_ms,
                 offset_probes=offset_probes, peer_timeout_s=peer_timeout_s, progress=progress)
    rec = r.record()
    return write_recording(rec, out, seconds=seconds,
                           meta={"peer": f"{host}:{port}", "train_packets": list(r.train_packets),
                                 "train_gap_ms": r.train_gap_ms})

