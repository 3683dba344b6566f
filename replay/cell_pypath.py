"""The cell shell's packet path in Python: the readable twin of ``_cellpath.Cell``.

``airlink cell`` moves its packets in C (:mod:`airlink.replay._cellpath`, on the shells'
link core); this class does the same with :mod:`airlink.replay.queues` and
:class:`airlink.replay.server.ByteServer`/``TraceServer`` when the C module is not built or
``AIRLINK_PURE_PYTHON=1``. Both have the same methods, so the cell has one TTI loop
(:meth:`airlink.replay.cell._LiveCell.loop`) whichever moves the packets::

    path.wait(deadline_ns, pidfds)   -> index of a readable pidfd, or -1 at the deadline
    path.backlog(bytes_f8)           -> the bytes each UE has queued
    path.serve(budgets, bb, bp, arr, dp, db, mp, t_end_ns)   -> serve, then fill the TTI's row
    path.set_uplink(ue, capacity_f8, tti_num, tti_den, start_ns)
    path.set_uplink_slots(on)        -> the unconstrained uplinks read at TTI ends only (serve)
    path.take_events([uplink])       -> per UE, the logged events as bytes of EVENT records
    path.ue_stats(ue)                -> the UE's counters (``uplink`` nested)

Packets read at or after a wait's deadline stay in the kernel until the TTI has been
decided, as in C: the clock is read before every packet. It has no offload mode: the cell
opens its TUN devices plain for it, so it sees the segments that the C path, in offload
mode, serves out of GSO super-packets (``tests/replay/test_cell_path.py`` checks both give
the same service TTI by TTI).
"""
from __future__ import annotations

import os
import select
import time
from fractions import Fraction

import numpy as np

from .queues import make_queue
from .server import EV_ARRIVAL, EV_DEPARTURE, EV_DROP, EV_MARK, EV_OPPORTUNITY, EVENT, ByteServer, TraceServer

READ_BATCH = 64         # packets per fd and wake-up at most (as the C path)
UPLINK_DRAIN = 1024     # packets per UE and TTI end at most, with the slotted uplink (as the C path)
MAX_PACKET = 65536


class _Direction:
    """One queue, its byte-granular server and counters (a UE's downlink or uplink)."""

    def __init__(self, queue, log: bool):
        self.queue, self.server = queue, ByteServer()
        self.arrivals_packets = self.arrivals_bytes = 0
        self.departures_packets = self.departures_bytes = 0
        self.events = [] if log else None
        self._drops = self._marks = (0, 0)

    def enqueue(self, p, now):
        self.arrivals_packets += 1
        self.arrivals_bytes += len(p)
        if self.events is not None:
            self.events.append((now, 0, EV_ARRIVAL, len(p)))
        self.queue.enqueue(p, now)
        self.log_drops_and_marks(now)

    def serve(self, budget, t, fd, path):
        deps = []
        if budget > 0 and self.events is not None:
            self.events.append((t, budget, EV_OPPORTUNITY, 0))
        self.server.serve(self.queue, budget, t, deps)
        self.log_drops_and_marks(t)
        for p, a, _t in deps:
            self.departures_packets += 1
            self.departures_bytes += len(p)
            if self.events is not None:
                self.events.append((t, a, EV_DEPARTURE, len(p)))
            try:
                os.write(fd, p)
            except OSError:
                path.write_errors += 1

    def log_drops_and_marks(self, t):
        """Drops and CE marks since the last call, as events at ``t``."""
        q = self.queue
        if self.events is None:
            return
        if q.drops_packets != self._drops[0]:
            self.events.append((t, q.drops_bytes - self._drops[1], EV_DROP, q.drops_packets - self._drops[0]))
            self._drops = (q.drops_packets, q.drops_bytes)
        if q.marks_packets != self._marks[0]:
            self.events.append((t, q.marks_bytes - self._marks[1], EV_MARK, q.marks_packets - self._marks[0]))
            self._marks = (q.marks_packets, q.marks_bytes)

    def busy(self) -> bool:
        return bool(self.queue) or self.server.in_service is not None

    def take_events(self) -> bytes:
        if not self.events:
            return b""
        out = np.array(self.events, dtype=EVENT)
        self.events.clear()
        return out.tobytes()


class _Uplink(_Direction):
    """A constrained uplink: an infinite queue served by a capacity trace's TTIs."""

    def __init__(self, capacity, tti_num, tti_den, start_ns, log):
        super().__init__(make_queue("infinite"), log)
        self.grid = TraceServer(capacity, Fraction(tti_num, tti_den * 10**9), start_ns=start_ns, record=log)
        self.server = self.grid

    def advance(self, now, fd, path):
        """Serve every TTI that ended by ``now``, departures written to ``fd``."""
        g = self.grid
        if g.next_boundary_ns() > now:
            return
        if self.busy():
            path.last_packet_ns = now
        deps = g.advance(now, self.queue)
        events = []
        if self.events is not None:
            events = [(g._boundary(int(k) + 1), int(b), EV_OPPORTUNITY, 0)
                      for k, b in g.take_records()[:, :2].tolist() if b > 0]
        for p, a, t in deps:
            self.departures_packets += 1
            self.departures_bytes += len(p)
            events.append((t, a, EV_DEPARTURE, len(p)))
            try:
                os.write(fd, p)
            except OSError:
                path.write_errors += 1
        if self.events is not None:
            events.sort(key=lambda e: (e[0], e[2]))     # a TTI's opportunity, then its departures
            self.events += events


class PyCellPath:
    """The cell's packets in Python (see the module); ``queues``: one queue object per UE."""

    rescues = 0
    log_lost = 0

    def __init__(self, outer_fd, inner_fds, net_base, net_mask, part_shift, queues, *, log=False):
        self.outer_fd, self.inner_fds = outer_fd, list(inner_fds)
        self.net_base, self.net_mask, self.part_shift = net_base, net_mask, part_shift
        self.n = len(self.inner_fds)
        self.log = bool(log)
        self.down = [_Direction(q, self.log) for q in queues]
        self.up = [None] * self.n
        self.up_packets = [0] * self.n
        self.up_bytes = [0] * self.n
        self._seen = [(0, 0, 0, 0)] * self.n
        self.unroutable = self.write_errors = 0
        self.last_packet_ns = 0
        self.uplink_slots = False

    def set_uplink_slots(self, on):
        """The slotted uplink (the C path's rule): while on, a UE's unconstrained uplink is
        read only in :meth:`serve`, before the TTI's downlink service; every packet its
        device holds then goes out."""
        self.uplink_slots = bool(on)

    def _slotted(self, u) -> bool:
        return self.uplink_slots and self.up[u] is None

    def set_uplink(self, ue, capacity, tti_num, tti_den, start_ns):
        if not 0 <= ue < self.n:
            raise IndexError("no such UE")
        if tti_num <= 0 or tti_den <= 0:
            raise ValueError("the uplink TTI must be positive")
        self.up[ue] = _Uplink(np.asarray(capacity, dtype=np.float64), tti_num, tti_den, start_ns, self.log)

    def close(self):
        """Nothing to stop (the C path's writer and rescuer threads have no twin here)."""

    def _ue_of(self, p) -> int:
        """The UE (0-based) whose address part holds the packet's IPv4 destination, or -1."""
        if len(p) < 20 or p[0] >> 4 != 4:
            return -1
        dst = int.from_bytes(p[16:20], "big")
        if dst & self.net_mask != self.net_base:
            return -1
        u = ((dst - self.net_base) >> self.part_shift) - 1
        return u if 0 <= u < self.n else -1

    def _uplinks_due(self, now, limit):
        nxt = limit
        for u, up in enumerate(self.up):
            if up is not None:
                up.advance(now, self.outer_fd, self)
                if up.busy() and up.grid.next_boundary_ns() < nxt:
                    nxt = up.grid.next_boundary_ns()
        return nxt

    def wait(self, deadline, pidfds) -> int:
        clock = time.monotonic_ns
        rlist = [self.outer_fd, *(fd for u, fd in enumerate(self.inner_fds) if not self._slotted(u)), *pidfds]
        while True:
            now = clock()
            wake = self._uplinks_due(now, deadline)
            if now >= deadline:
                return -1
            try:
                ready = select.select(rlist, [], [], max(wake - now, 0) / 1e9)[0]
            except InterruptedError:    # pragma: no cover - PEP 475 retries
                continue
            if not ready:
                continue
            moved = False
            if self.outer_fd in ready:
                moved = True
                for _ in range(READ_BATCH):
                    now = clock()
                    if now >= deadline:
                        break
                    try:
                        p = os.read(self.outer_fd, MAX_PACKET)
                    except BlockingIOError:
                        break
                    u = self._ue_of(p)
                    if u < 0:
                        self.unroutable += 1
                    else:
                        self.down[u].enqueue(p, now)
            for u, fd in enumerate(self.inner_fds):
                if fd in ready:
                    moved = True
                    self._read_uplink(u, fd, deadline)
            if moved:
                self.last_packet_ns = clock()
            for j, fd in enumerate(pidfds):
                if fd in ready:
                    return j

    def _read_uplink(self, u, fd, deadline, batch=READ_BATCH):
        """A UE's uplink packets (at most ``batch``) go straight out, or into its constrained uplink."""
        clock = time.monotonic_ns
        up = self.up[u]
        for _ in range(batch):
            now = clock()
            if now >= deadline:
                return
            try:
                p = os.read(fd, MAX_PACKET)
            except BlockingIOError:
                return
            self.up_packets[u] += 1
            self.up_bytes[u] += len(p)
            if up is None:
                try:
                    os.write(self.outer_fd, p)
                except OSError:
                    self.write_errors += 1
                continue
            up.advance(now, self.outer_fd, self)    # TTIs that ended before it came go without it
            up.enqueue(p, now)

    def backlog(self, out):
        for u, d in enumerate(self.down):
            out[u] = d.server.backlog(d.queue)[0]

    def serve(self, budgets, bb, bp, arr, dp, db, mp, t_end=0):
        if self.uplink_slots:           # the TTI's uplink leaves at its end, then its downlink
            moved = False
            for u, fd in enumerate(self.inner_fds):
                if self._slotted(u) and select.select([fd], [], [], 0)[0]:
                    self._read_uplink(u, fd, float("inf"), UPLINK_DRAIN)
                    moved = True
            if moved:
                self.last_packet_ns = time.monotonic_ns()
        for u, d in enumerate(self.down):
            d.serve(int(budgets[u]), t_end, self.inner_fds[u], self)
            bb[u], bp[u] = d.server.backlog(d.queue)
            q, prev = d.queue, self._seen[u]
            arr[u] = d.arrivals_bytes - prev[0]
            dp[u] = q.drops_packets - prev[1]
            db[u] = q.drops_bytes - prev[2]
            mp[u] = q.marks_packets - prev[3]
            self._seen[u] = (d.arrivals_bytes, q.drops_packets, q.drops_bytes, q.marks_packets)

    def take_events(self, uplink=False):
        if uplink:
            return tuple(up.take_events() if up is not None else b"" for up in self.up)
        return tuple(d.take_events() for d in self.down)

    def ue_stats(self, u) -> dict:
        d, up = self.down[u], self.up[u]
        qb, qp = d.server.backlog(d.queue)
        q = d.queue
        out = {"arrivals_packets": d.arrivals_packets, "arrivals_bytes": d.arrivals_bytes,
               "departures_packets": d.departures_packets, "departures_bytes": d.departures_bytes,
               "drops_packets": q.drops_packets, "drops_bytes": q.drops_bytes,
               "queued_packets": qp, "queued_bytes": qb,
               "marks_packets": q.marks_packets, "marks_bytes": q.marks_bytes}
        uqb, uqp = up.grid.backlog(up.queue) if up is not None else (0, 0)
        out["uplink"] = {"arrivals_packets": self.up_packets[u], "arrivals_bytes": self.up_bytes[u],
                         "departures_packets": up.departures_packets if up else self.up_packets[u],
                         "departures_bytes": up.departures_bytes if up else self.up_bytes[u],
                         "drops_packets": 0, "drops_bytes": 0, "queued_packets": uqp, "queued_bytes": uqb,
                         "capacity_bytes": up.grid.capacity_bytes if up else 0, "ttis": up.grid.k if up else 0}
        return out
