"""Workload-aware replay of a recorded path: one direction's stage (``airlink link --mode workload``).

A saturator trace says how fast a path drains a queue that never runs dry. A cellular link
serves an application by the state of the application's own queue: a short train after an
idle period is scheduled as a light user (CellReplay's *light* trace: packet trains sent at
idle gaps), a flow that keeps its queue full as a heavy one (the *heavy* trace: a
saturator's delivery opportunities). This stage replays one direction of a CellReplay trace
set (:mod:`airlink.traces.cellreplay`, as ``airlink record`` writes it) by that rule.

This class is the readable reference of the rule; the shell runs it in the C link core
(``lc_workload`` in replay/_linkcore.h, :meth:`WorkloadStage.fast`), which
tests/replay/test_link_core.py holds to the same release times, counters and log lines
(and tests/replay/test_replay_offload.py with GSO super-packets, served as their segments).

The rule (docs/replay.md, "Workload-aware replay"); times in ns from the shell's start
``t0``, a delivery opportunity (PDO) is ``PDO_BYTES`` = 1400 bytes:

- **Idle or backlogged.** ``free`` is when the application's last packet leaves the radio
  (before its base delay). A packet of ``s`` bytes arriving at ``t`` finds the queue idle
  when there is no earlier packet or ``t > free + 1 ms + idle``: the recorded PDOs are
  whole milliseconds (``mm-cellular`` compares whole-ms clocks to the same effect), and
  ``idle`` is CellReplay's long-to-short timer (0 by default, as in ``mm-cellular``).
- **After idle: a new burst on a light train.** The burst takes the light train recorded
  last at or before ``t - t0`` (the light trace loops with period ``T_light`` = its last
  time + its last gap) and the base delay ``d`` interpolated linearly between the trains'
  base delays at ``t - t0``. The packet leaves the radio at once (``pdo_0 = 0``); ``1400 - s``
  bytes of the PDO remain.
- **Within a burst, packet ``k`` rides the light PDOs.** With ``e = t - start`` (burst
  start), PDOs whose millisecond has passed (``pdo + 1 ms <= e``) went unused and are
  skipped (the next one starts full); a packet that does not fit the bytes left of the
  current PDO takes the next one. It leaves the radio at ``max(t, start + pdo[k])``. When the burst outgrows its train, it continues on the
  PDOs (from the same position ``k``) of the recorded train nearest in time that is longer
  than ``k`` - a 30-packet burst after idle is served as the recording's 40-packet trains
  were, not as a saturator.
- **Beyond the longest train: heavy.** The packet joins a FIFO at ``a = max(t, l)`` (``l``:
  when the burst's last light-served packet left the radio) that
  the heavy trace drains (opportunities at ``t0 + L * T_heavy + h[j]`` for loop ``L``,
  ``T_heavy`` = the heavy trace's last time, as Mahimahi loops); bytes left over in an
  opportunity serve the next packet if it was queued before that opportunity (``a`` earlier
  than it), else they are lost. The packet leaves the radio at the opportunity that serves
  its last byte; its base delay is ``d`` interpolated at ``a``.
- **Release** (the packet leaves the shell): ``max(radio + d + offset(s), previous
  release)``: the packet-size latency offset interpolated as ``mm-cellular`` does
  (:meth:`~airlink.traces.cellreplay.SizeOffset.offset_ms_at`), never reordering.

State kept per direction: ``free``, the burst (start, ``d``, PDO list, position ``k``,
bytes left in PDO ``k``), the heavy FIFO's last opportunity (absolute index, bytes left)
and the last release. All release times are decided when a packet arrives (the service of
a FIFO by a fixed opportunity schedule does not depend on later packets), so the stage
holds a queue of ``(release_ns, packet)`` as a delay does.

Counters in ``stats()``: ``light_packets``/``heavy_packets`` (packets served by a light
train or by the heavy trace), ``bursts`` (idle starts), ``heavy_bytes`` (bytes served by the
heavy trace) and ``heavy_opportunities`` (heavy opportunities from the first one used to
the last, used or not): ``heavy_bytes / (1400 x heavy_opportunities)`` is how much of the
recorded saturator's delivery the replayed flow took while it was heavy - 1 for a flow
that kept the queue full, whose rate is then the recording's.
"""
from __future__ import annotations

import bisect

import numpy as np

from airlink.traces.cellreplay import OFFSET_SIZE_STEP, PDO_BYTES, Direction
from airlink.core.errors import AirlinkError

from .eventlog import EventLogThread, formatter, in_log_order
from .server import EV_ARRIVAL, EV_DEPARTURE, EVENT
from .stages import TimedStage, _fastpath

MS = 1_000_000
#: The recorded PDOs are whole milliseconds: a PDO at ``p`` ms is somewhere in ``[p, p + 1)``.
RESOLUTION_NS = MS


class WorkloadStage(TimedStage):
    """One direction of a CellReplay trace set served by the workload rule (module notes).

    ``direction`` is a :class:`~airlink.traces.cellreplay.Direction`; ``idle_ms`` the idle
    time after which a packet starts a new burst (ms, >= 0); ``start_ns`` the shell's start.
    ``log``: an mm-link log (:class:`airlink.traces.LinkLogWriter`, times in ms since
    ``base_ns``) of every packet's arrival (``+``) and departure (``-``, with its delay in the
    shell); no opportunity lines (the rule has no capacity per TTI to report).

    A packet's departure is logged when it arrives (its release is decided then); the
    events (:data:`~.server.EVENT` records: the C stage's, or the Python engine's own) are
    handed in batches to a log thread (:class:`.eventlog.EventLogThread`), which writes
    those no later event can come before (:class:`HeldBackEvents`).
    """

    kind = "workload"
    FLUSH_EVENTS = 20000        # events held before writing those that are final

    def __init__(self, direction: Direction, *, start_ns: int = 0, idle_ms: float = 0.0,
                 log=None, base_ns: int | None = None):
        super().__init__()
        self.log = log
        self.base_ns = int(start_ns) if base_ns is None else int(base_ns)
        self._events = [] if log is not None else None      # the Python engine's records
        self._fast = None           # the C stage serving this direction, when it keeps the log
        self._held = self._log_thread = None
        if not idle_ms >= 0:
            raise AirlinkError(f"the idle time must be a non-negative number of ms, got {idle_ms}")
        light = direction.light
        self.start_ns = int(start_ns)
        self.idle_ns = int(round(float(idle_ms) * MS))
        self.train_t = [int(x) * MS for x in light.time_ms]
        self.train_d = [int(x) * MS for x in light.base_delay_ms]
        self.train_pdo = [[int(x) * MS for x in p] for p in light.pdo_ms]
        gaps = np.diff(light.time_ms)
        # trains all at one time (allowed by the format) still loop: a period of at least 1 ms
        self.light_period = max(MS, self.train_t[-1] + (int(gaps[-1]) * MS if len(gaps) else MS))
        self.longest = max(len(p) for p in self.train_pdo)
        self.heavy = [int(x) * MS for x in direction.heavy_ms]
        self.heavy_period = self.heavy[-1]
        self.offset = direction.size_offset
        self._offset_ns = {}
        # state (module notes)
        self.free = None              # radio departure of the last packet; None: none yet
        self.light_free = 0           # radio departure of the burst's last light-served packet
        self.burst_start = 0
        self.burst_delay = 0
        self.burst_train = 0          # index of the train the burst started on
        self.pdos = []                # the burst's PDO times after its start (ns)
        self.k = 0
        self.room = 0
        self.h_index = -1             # absolute index of the heavy opportunity last used
        self.h_room = 0
        self.last_release = 0
        self.light_packets = self.heavy_packets = self.bursts = self.heavy_bytes = 0
        self.h_first = None           # absolute index of the first heavy opportunity used

    # ---------------------------------------------------------------- the rule

    def _train_at(self, rel_ns: int) -> int:
        """Index of the light train recorded last at or before ``rel_ns`` (looped)."""
        r = rel_ns % self.light_period
        return max(0, bisect.bisect_right(self.train_t, r) - 1)

    def base_delay_ns(self, rel_ns: int) -> int:
        """Base delay at ``rel_ns`` after the start: linear between the trains' base delays
        (the last one held until the light trace loops)."""
        r = rel_ns % self.light_period
        i = self._train_at(rel_ns)
        if i + 1 >= len(self.train_t) or r <= self.train_t[i]:
            return self.train_d[i]
        t0, t1 = self.train_t[i], self.train_t[i + 1]
        d0, d1 = self.train_d[i], self.train_d[i + 1]
        return d0 + (d1 - d0) * (r - t0) // (t1 - t0)

    def _extend(self) -> bool:
        """Continue the burst's PDOs past position ``k`` with the train nearest in time to
        the burst's own that is longer than ``k``; False when no train is."""
        k = len(self.pdos)
        t = self.train_t[self.burst_train]
        best = None
        for i, p in enumerate(self.train_pdo):
            if len(p) > k and (best is None or abs(self.train_t[i] - t) < abs(self.train_t[best] - t)):
                best = i
        if best is None:
            return False
        last = self.pdos[-1] if self.pdos else 0
        self.pdos.extend(max(last, x) for x in self.train_pdo[best][k:])
        return True

    def _offset(self, size: int) -> int:
        if self.offset is None:
            return 0
        v = self._offset_ns.get(size)
        if v is None:
            v = self._offset_ns[size] = int(round(self.offset.offset_ms_at(size) * MS))
        return v

    def _heavy_time(self, j: int) -> int:
        loops, i = divmod(j, len(self.heavy))
        return self.start_ns + loops * self.heavy_period + self.heavy[i]

    def _heavy_first_after(self, a: int) -> int:
        """Absolute index of the first heavy opportunity later than ``a``."""
        rel = a - self.start_ns
        loops = rel // self.heavy_period
        i = bisect.bisect_right(self.heavy, rel - loops * self.heavy_period)
        if i == len(self.heavy):
            loops, i = loops + 1, 0
        return loops * len(self.heavy) + i

    def _heavy_serve(self, a: int, size: int) -> int:
        """Radio departure of ``size`` bytes queued at ``a`` behind the heavy FIFO: the
        opportunities are walked one by one here (the C core jumps to the last one)."""
        self.heavy_bytes += size
        need = size
        if self.h_index >= 0 and self.h_room > 0 and a < self._heavy_time(self.h_index):
            take = min(need, self.h_room)
            need -= take
            self.h_room -= take
            if need == 0:
                return self._heavy_time(self.h_index)
            j = self.h_index + 1
        else:
            j = max(self._heavy_first_after(a), self.h_index + 1)
            if self.h_first is None:
                self.h_first = j
        while True:
            take = min(need, PDO_BYTES)
            need -= take
            if need == 0:
                self.h_index, self.h_room = j, PDO_BYTES - take
                return self._heavy_time(j)
            j += 1

    def release_ns(self, t: int, size: int) -> int:
        """Decide when a packet of ``size`` bytes arriving at ``t`` leaves (the rule in the
        module notes); updates the state."""
        if self.free is None or t > self.free + RESOLUTION_NS + self.idle_ns:
            rel = t - self.start_ns
            self.bursts += 1
            self.burst_start, self.burst_train = t, self._train_at(rel)
            self.burst_delay = self.base_delay_ns(rel)
            self.pdos = list(self.train_pdo[self.burst_train])
            self.k, self.room = 0, max(0, PDO_BYTES - size)
            radio, delay = t, self.burst_delay
            self.light_free = radio
            self.light_packets += 1
        else:
            e = t - self.burst_start
            placed = False
            while True:
                while self.k < len(self.pdos) and self.pdos[self.k] + RESOLUTION_NS <= e:
                    self.k += 1
                    self.room = PDO_BYTES
                if not placed and self.room < size:
                    # the packet starts on a fresh PDO and takes ceil(s / 1400) of them
                    m = -(-size // PDO_BYTES)
                    self.k += m if self.room < PDO_BYTES else m - 1
                    self.room = m * PDO_BYTES
                placed = True
                if self.k < len(self.pdos) or self.k >= self.longest or not self._extend():
                    break
            if self.k < len(self.pdos):
                self.room -= size
                radio, delay = max(t, self.burst_start + self.pdos[self.k]), self.burst_delay
                self.light_free = radio
                self.light_packets += 1
            else:
                a = max(t, self.light_free)
                radio = self._heavy_serve(a, size)
                delay = self.base_delay_ns(a - self.start_ns)
                self.heavy_packets += 1
        self.free = radio if self.free is None else max(self.free, radio)
        out = max(radio + delay + self._offset(size), self.last_release)
        self.last_release = out
        return out

    # ---------------------------------------------------------------- the stage

    def push(self, packet, now_ns: int) -> None:
        super().push(packet, now_ns)
        if self._events is not None:
            n, out = len(packet), self._q[-1][0]
            self._events += ((now_ns, 0, EV_ARRIVAL, n), (out, now_ns, EV_DEPARTURE, n))
            if len(self._events) > self.FLUSH_EVENTS:
                self._hand_over(np.array(self._events, EVENT).tobytes())
                self._events = []

    def _hand_over(self, raw: bytes) -> None:
        """Hand a batch of logged events to the log thread (made at the first batch)."""
        if self._log_thread is None:
            self._held = HeldBackEvents()
            self._log_thread = EventLogThread(self._held, name="airlink-workload-log")
        self._log_thread.put(self.log, raw, self.base_ns)

    def drain_fast(self) -> None:
        if self._fast is not None:
            self._hand_over(self._fast.take_events())

    def forget_fast(self) -> None:
        self._fast = None

    def close(self, now_ns: int) -> None:
        """Write the rest of the log: every event but the departures of packets still held
        (the last ones logged)."""
        if self.log is None:
            return
        try:
            if self._fast is not None:
                self._hand_over(self._fast.take_events())
                held = self._fast.stats()["queued_packets"]
            else:
                self._hand_over(np.array(self._events, EVENT).tobytes())
                self._events = []
                held = len(self._q)
            thread, self._log_thread = self._log_thread, None
            thread.close()
            self.log.write_lines(self._held.rest(held, self.base_ns))
            self.log.close()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        if self.log is not None:
            self.log.abort()

    def fast_refusal(self):
        if self.arrivals_packets:
            return "the workload stage was already running"
        return super().fast_refusal()

    def fast(self):
        """The same rule in the C link core (``lc_workload`` in replay/_linkcore.h), given this
        stage's trace set in ns; the packet-size offsets as a table by size (this stage's
        :meth:`_offset`, constant from the last recorded size on)."""
        if self.fast_refusal():
            return None

        def i8(values):
            return np.asarray(values, dtype="<i8").tobytes()
        sizes = 0 if self.offset is None else len(self.offset.offset_ms) * OFFSET_SIZE_STEP + 1
        c = _fastpath().workload(
            self.start_ns, self.idle_ns, self.light_period, i8(self.train_t), i8(self.train_d),
            i8([len(p) for p in self.train_pdo]), i8([x for p in self.train_pdo for x in p]),
            i8(self.heavy), self.heavy_period, i8([self._offset(s) for s in range(sizes)]),
            self.log is not None)
        if self.log is not None:
            self._fast = c
        return c

    def stats(self) -> dict:
        out = super().stats()
        span = 0 if self.h_first is None else self.h_index - self.h_first + 1
        out.update(light_packets=self.light_packets, heavy_packets=self.heavy_packets,
                   bursts=self.bursts, idle_ms=self.idle_ns / MS, heavy_bytes=self.heavy_bytes,
                   heavy_opportunities=span)
        return out


class HeldBackEvents:
    """A workload stage's log rule, as the format of its log thread: each batch of
    :data:`~.server.EVENT` records (in the order they were logged: a packet's arrival, then
    its departure, decided at its arrival) is added to those held back, and the lines of
    every held event earlier than the last arrival are returned in log order
    (:func:`.eventlog.in_log_order`) - every event to come is at or after that arrival.
    :meth:`rest` gives the lines of what is left at the end, less the departures of the
    packets still in the shell (the last departures logged: releases never reorder)."""

    def __init__(self):
        self._format = formatter()
        self._held = np.empty(0, EVENT)

    def __call__(self, raw, base_ns: int) -> str:
        ev = np.concatenate((self._held, np.frombuffer(raw, EVENT)))
        arrivals = ev["t"][ev["kind"] == EV_ARRIVAL]
        if not len(arrivals):
            self._held = ev
            return ""
        final = ev["t"] < arrivals.max()
        self._held = ev[~final]
        return self._format(in_log_order(ev[final].tobytes()), base_ns)

    def rest(self, held_packets: int, base_ns: int) -> str:
        ev = self._held
        departures = np.flatnonzero(ev["kind"] == EV_DEPARTURE)
        if held_packets:
            ev = np.delete(ev, departures[-held_packets:])
        self._held = np.empty(0, EVENT)
        return self._format(in_log_order(ev.tobytes()), base_ns)
