"""The byte-granular trace server: drains a queue by a capacity trace, TTI by TTI.

TTI ``k`` covers ``[start + k*tti, start + (k+1)*tti)``; its capacity ``c_k`` (bytes,
possibly fractional) is served **at the end** of the TTI to the bytes queued by then
(a Mahimahi opportunity at ``t`` ms is TTI ``t-1`` of a 1 ms trace, so an integer
trace behaves exactly as in mm-link). Unlike mm-link, service is byte-granular: the
head packet may be split across TTIs (as RLC segments an SDU) and several small packets
share one TTI; a packet departs when its last byte is served. Capacity left unused in a
TTI is lost. Fractional capacities carry their remainder (:func:`carry_budget`), so the
integer budget of TTI ``k`` is ``floor(C_k) - floor(C_{k-1})`` with ``C_k`` the running sum
(12 Mbit/s at 0.125 ms TTIs gives 187, 188, 187, 188, ... bytes).

The server is pure: it is driven by :meth:`advance` with a clock value in integer
nanoseconds, so tests run it with a fake clock.
"""
from __future__ import annotations

from fractions import Fraction
from math import floor

import numpy as np

from airlink.core.errors import AirlinkError

#: a running total within this much of a whole byte counts as whole (float sums of
#: decimal fractions: ten TTIs of 0.1 byte make 0.9999999999999999)
CARRY_EPS = 1e-9


def carry_budget(carry: float, amount: float) -> tuple:
    """``(budget, carry)``: the whole bytes of ``carry + amount`` that may be served now,
    ``floor(carry + amount + CARRY_EPS)``, and the remainder carried to the next TTI
    (down to ``-CARRY_EPS`` after a total just short of a whole byte). The one carry rule
    of airlink: the trace server's TTIs, the cell's scheduled budgets (:func:`carry_budgets`)
    and the C link core (``lc_carry_budget`` in replay/_linkcore.c)."""
    total = carry + amount
    budget = floor(total + CARRY_EPS)
    return budget, total - budget


def carry_budgets(carry: np.ndarray, amounts) -> np.ndarray:
    """:func:`carry_budget` for many queues at once: ``carry`` (float64) is updated in place;
    returns the budgets (float64 holding whole numbers)."""
    carry += amounts
    budgets = np.floor(carry + CARRY_EPS)
    carry -= budgets
    return budgets


#: an event of the Mahimahi-format logs as the C link core records it (replay/_linkcore.h's
#: lc_event) and the cell's Python packet path too: time (ns), x, kind, len - an arrival
#: (len bytes), a drop (len packets, x bytes), an opportunity (x bytes granted), a departure
#: (len bytes, x = its arrival time) or a CE mark (len packets, x bytes)
EVENT = np.dtype([("t", "<i8"), ("x", "<i8"), ("kind", "<i4"), ("len", "<i4")])
EV_ARRIVAL, EV_DROP, EV_OPPORTUNITY, EV_DEPARTURE, EV_MARK = 0, 1, 2, 3, 4

# Columns of the per-TTI record (see TraceServer.records); "mac" kind names.
RECORD_COLUMNS = ("tti", "capacity_bytes", "served_bytes", "backlog_bytes", "backlog_packets",
                  "drops_packets", "drops_bytes", "arrivals_bytes")


class ByteServer:
    """Byte-granular service of one queue: :meth:`serve` hands out a budget of bytes to the
    head of the queue; a packet may be split across budgets (as RLC segments an SDU) and
    departs when its last byte is served. Shared by :class:`TraceServer` (budgets from a
    capacity trace) and the cell shell (budgets from the scheduler)."""

    def __init__(self):
        self.in_service = None     # (packet, arrival_ns) being segmented
        self.in_service_left = 0   # its bytes still to serve
        self.served_bytes = 0

    def backlog(self, queue) -> tuple:
        """``(bytes, packets)`` waiting: the queue plus the unserved part of the packet in service."""
        if self.in_service is None:
            return queue.backlog_bytes, len(queue)
        return queue.backlog_bytes + self.in_service_left, len(queue) + 1

    def serve(self, queue, budget: int, t: int, out: list) -> int:
        """Serve up to ``budget`` bytes at time ``t``; departures are appended to ``out`` as
        ``(packet, arrival_ns, t)``. Returns the bytes served (less than ``budget`` only
        when the queue ran empty)."""
        served = 0
        left = budget
        while left > 0:
            if self.in_service is None:
                item = queue.dequeue(t)
                if item is None:
                    break
                self.in_service = item
                self.in_service_left = len(item[0])
            take = self.in_service_left if self.in_service_left < left else left
            self.in_service_left -= take
            left -= take
            served += take
            if self.in_service_left == 0:
                out.append((self.in_service[0], self.in_service[1], t))
                self.in_service = None
        self.served_bytes += served
        return served


class TraceServer(ByteServer):
    """Serve a queue by a per-TTI capacity trace.

    Parameters
    ----------
    capacity : array of float
        Bytes that may be served in each TTI.
    tti : Fraction or float
        TTI length in seconds (exact Fraction preferred: 1/600 s stays exact).
    start_ns : int
        Clock time at which TTI 0 starts.
    loop : bool
        Repeat the trace when it ends (default); otherwise :attr:`finished` turns True.
    record : bool
        Keep one row per TTI (see :data:`RECORD_COLUMNS`) for the per-TTI log.
    """

    def __init__(self, capacity, tti, *, start_ns: int = 0, loop: bool = True, record: bool = False):
        cap = np.asarray(capacity, dtype=np.float64).ravel()
        if cap.size == 0:
            raise AirlinkError("the capacity trace is empty")
        if not np.isfinite(cap).all() or (cap < 0).any():
            raise AirlinkError("capacity must be finite and non-negative in every TTI")
        if loop and cap.sum() == 0:
            raise AirlinkError("a looping trace must have some capacity (all TTIs are 0 bytes)")
        self.capacity = cap
        self._cap_list = cap.tolist()
        self.tti = Fraction(tti).limit_denominator(10**9) if not isinstance(tti, Fraction) else tti
        if self.tti <= 0:
            raise AirlinkError("TTI must be positive")
        self._tti_ns = self.tti * 10**9
        self.start_ns = int(start_ns)
        self.loop = loop
        self.k = 0                 # next TTI to serve (absolute count, not wrapped)
        self._carry = 0.0          # fractional byte remainder
        self._end_k = self._boundary(1)
        self._skip_ns = 4 * (self._tti_ns.numerator // self._tti_ns.denominator + 1)
        ByteServer.__init__(self)
        self.capacity_bytes = 0    # integer budget offered so far
        self.finished = False
        self.record = record
        self.rows: list = []       # per-TTI tuples while recording
        self._idle_chunks: list = []  # (position in rows, ndarray) for fast-forwarded idle TTIs
        self._arrivals_seen = 0
        self._drops_seen = (0, 0)

    def _boundary(self, k: int) -> int:
        """Clock time (ns) at which TTI ``k`` starts, exact and drift-free."""
        x = k * self._tti_ns
        return self.start_ns + x.numerator // x.denominator

    def next_boundary_ns(self) -> int:
        """When the current TTI ends (its capacity is served then)."""
        return self._end_k

    def advance(self, now_ns: int, queue, arrivals_bytes: int = 0) -> list:
        """Serve every TTI that ended at or before ``now_ns``.

        Returns departures as ``(packet, arrival_ns, departure_ns)`` in order.
        ``arrivals_bytes`` is the caller's running total of arrivals (for the per-TTI record).
        """
        out = []
        n = len(self._cap_list)
        caps = self._cap_list
        while self._end_k <= now_ns and not self.finished:
            if self.in_service is None and not queue and now_ns - self._end_k > self._skip_ns:
                self._fast_forward(now_ns, queue, arrivals_bytes)
                continue
            idx = self.k % n
            budget, self._carry = carry_budget(self._carry, caps[idx])
            self.capacity_bytes += budget
            served = self.serve(queue, budget, self._end_k, out)
            if self.record:
                self._record_row(self.k, budget, served, queue, arrivals_bytes)
            self._next_tti()
        return out

    def _next_tti(self):
        self.k += 1
        if not self.loop and self.k >= len(self._cap_list):
            self.finished = True
        self._end_k = self._boundary(self.k + 1)

    def _record_row(self, k, budget, served, queue, arrivals_bytes):
        b, p = self.backlog(queue)
        dp, db = queue.drops_packets - self._drops_seen[0], queue.drops_bytes - self._drops_seen[1]
        self._drops_seen = (queue.drops_packets, queue.drops_bytes)
        self.rows.append((k, budget, served, b, p, dp, db, arrivals_bytes - self._arrivals_seen))
        self._arrivals_seen = arrivals_bytes

    def _fast_forward(self, now_ns, queue, arrivals_bytes):
        """Skip TTIs that end before ``now_ns`` while nothing is queued (vectorised)."""
        x = (now_ns - self.start_ns) * Fraction(1) / self._tti_ns
        last = floor(x) - 1            # last TTI that ended at or before now
        n = len(self._cap_list)
        if not self.loop:
            last = min(last, n - 1)
        count = last - self.k + 1
        if count <= 1:
            # one TTI only: take the normal path once
            count = 1
        ks = np.arange(self.k, self.k + count)
        caps = self.capacity[ks % n]
        cum = self._carry + np.cumsum(caps)
        fl = np.floor(cum + CARRY_EPS)     # carry_budget over the running sum
        budgets = np.diff(np.concatenate(([0.0], fl)))
        self._carry = float(cum[-1] - fl[-1])
        self.capacity_bytes += int(fl[-1])
        if self.record:
            rows = np.zeros((count, len(RECORD_COLUMNS)))
            rows[:, 0] = ks
            rows[:, 1] = budgets
            dp, db = queue.drops_packets - self._drops_seen[0], queue.drops_bytes - self._drops_seen[1]
            rows[0, 5], rows[0, 6] = dp, db
            rows[0, 7] = arrivals_bytes - self._arrivals_seen
            self._drops_seen = (queue.drops_packets, queue.drops_bytes)
            self._arrivals_seen = arrivals_bytes
            self._idle_chunks.append((len(self.rows), rows))
            self.rows.append(None)
        self.k += count - 1
        self._next_tti()

    def records(self) -> np.ndarray:
        """Per-TTI rows so far as an array with columns :data:`RECORD_COLUMNS`."""
        parts, chunks = [], dict(self._idle_chunks)
        busy = []
        for i, row in enumerate(self.rows):
            if row is None:
                if busy:
                    parts.append(np.array(busy, dtype=np.float64))
                    busy = []
                parts.append(chunks[i])
            else:
                busy.append(row)
        if busy:
            parts.append(np.array(busy, dtype=np.float64))
        if not parts:
            return np.zeros((0, len(RECORD_COLUMNS)))
        return np.vstack(parts)

    def take_records(self) -> np.ndarray:
        """:meth:`records`, then forget them (for writing a long log in pieces)."""
        out = self.records()
        self.rows, self._idle_chunks = [], []
        return out
