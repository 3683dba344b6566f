"""What a shell does to the packets of one direction: a *stage*.

A stage is a pure object driven by an injected clock (integer nanoseconds), so it is
tested without root and reused by other shells (a cell shell puts a scheduler behind the
same interface)::

    stage.push(packet, now_ns)        # a packet arrived
    stage.pull(now_ns) -> [packet]    # packets due to leave by now, in order
    stage.next_event_ns()             # when pull next has something to give (None: idle)
    stage.finished                    # True when the stage ends the shell (link --once)
    stage.stats()                     # counters: arrivals = departures + drops + queued

The event loop calls ``pull`` *before* pushing packets read at ``now`` (a TTI that ended
earlier is served before later arrivals), then pushes, then pulls again.
"""
from __future__ import annotations

import bisect
import csv
from collections import deque
from pathlib import Path

import numpy as np

from airlink.core.atomic import commit, create_partial, output_error
from airlink.core.envflags import env_flag
from airlink.core.errors import AirlinkError, FormatError

from .queues import PER_PACKET, core_parameters
from .rng import SplitMix64
from .server import RECORD_COLUMNS, TraceServer


class Stage:
    """Counters shared by all stages; the base stage passes packets straight through."""

    kind = "pass"
    finished = False
    per_packet = False      # True: the stage needs packets of one segment (no GSO)

    def __init__(self):
        self.arrivals_packets = self.arrivals_bytes = 0
        self.departures_packets = self.departures_bytes = 0
        self.drops_packets = self.drops_bytes = 0
        self._ready = []

    def push(self, packet, now_ns: int) -> None:
        self.arrivals_packets += 1
        self.arrivals_bytes += len(packet)
        self._ready.append(packet)

    def pull(self, now_ns: int) -> list:
        out = self._ready
        if out:
            self._ready = []
            self.departures_packets += len(out)
            self.departures_bytes += sum(map(len, out))
        return out

    def next_event_ns(self):
        return None

    def queued(self) -> tuple:
        """``(bytes, packets)`` held by the stage now."""
        return sum(map(len, self._ready)), len(self._ready)

    def close(self, now_ns: int) -> None:
        """Flush logs; called once when the shell ends."""

    def abort(self) -> None:
        """Stop logging after a failure elsewhere (logs stay ``NAME.partial``)."""

    def fast_refusal(self):
        """Why this stage has no C version (a sentence for ``--stats``), or None."""
        if _fastpath() is None:
            return "the C fast path is off (AIRLINK_PURE_PYTHON) or not built"
        return None

    def drain_fast(self) -> None:
        """Write out what the C stage from :meth:`fast` logged so far (the C relay calls
        this through its ``on_log``); nothing for a stage without logs."""

    def forget_fast(self) -> None:
        """The shell runs the Python loop after all (the other direction has no C version):
        the stage logs what it serves itself, not what the C stage from :meth:`fast` would."""

    def fast(self):
        """The same stage in the C fast path (:mod:`airlink.replay._fastpath`), or None
        when this configuration has no C version (the shell then runs the Python loop)."""
        fp = _fastpath()
        return fp.passthrough() if fp and type(self) is Stage else None

    def stats(self) -> dict:
        qb, qp = self.queued()
        return {"stage": self.kind, "arrivals_packets": self.arrivals_packets,
                "arrivals_bytes": self.arrivals_bytes,
                "departures_packets": self.departures_packets,
                "departures_bytes": self.departures_bytes,
                "drops_packets": self.drops_packets, "drops_bytes": self.drops_bytes,
                "queued_packets": qp, "queued_bytes": qb}


class TimedStage(Stage):
    """A stage that decides each packet's departure time when it arrives
    (:meth:`release_ns`, never earlier than the previous one's) and holds it in a FIFO of
    ``(release_ns, packet)`` until then."""

    def __init__(self):
        super().__init__()
        self._q = deque()
        self._qbytes = 0

    def release_ns(self, now_ns: int, size: int) -> int:
        """Departure time (ns) of a ``size``-byte packet arriving at ``now_ns``."""
        raise NotImplementedError

    def push(self, packet, now_ns: int) -> None:
        n = len(packet)
        self.arrivals_packets += 1
        self.arrivals_bytes += n
        self._q.append((self.release_ns(now_ns, n), packet))
        self._qbytes += n

    def pull(self, now_ns: int) -> list:
        q = self._q
        if not q or q[0][0] > now_ns:
            return []
        out = []
        while q and q[0][0] <= now_ns:
            out.append(q.popleft()[1])
        n = sum(map(len, out))
        self._qbytes -= n
        self.departures_packets += len(out)
        self.departures_bytes += n
        return out

    def next_event_ns(self):
        return self._q[0][0] if self._q else None

    def queued(self) -> tuple:
        return self._qbytes, len(self._q)


class DelayStage(TimedStage):
    """Fixed one-way delay, or one that follows a time series; never reorders.

    ``delay_ms`` is a number, or a :class:`DelaySeries`; a packet arriving at ``t``
    leaves at ``max(t + delay(t), previous departure)``.
    """

    kind = "delay"

    def __init__(self, delay_ms, *, start_ns: int = 0):
        super().__init__()
        self.series = delay_ms if isinstance(delay_ms, DelaySeries) else None
        if self.series is None:
            if not delay_ms >= 0:
                raise AirlinkError(f"delay must be a non-negative number of ms, got {delay_ms}")
            self.delay_ns = int(round(float(delay_ms) * 1_000_000))
        self.start_ns = start_ns
        self._last = 0

    def release_ns(self, now_ns: int, size: int) -> int:
        t = now_ns + (self.delay_ns if self.series is None else self.series.delay_ns(now_ns - self.start_ns))
        self._last = max(t, self._last)
        return self._last

    def fast_refusal(self):
        return "a delay series runs the Python loop" if self.series is not None else super().fast_refusal()

    def fast(self):
        fp = _fastpath()
        return fp.delay(self.delay_ns) if fp and self.series is None else None


class DelaySeries:
    """One-way delay over time, linear between samples, repeating with period
    ``last time + last step``. Read from CSV: ``time_ms,delay_ms`` (a header naming
    them, or two bare numeric columns; ``time_s`` is accepted too)."""

    def __init__(self, times_ms, delays_ms, *, source: str = "series"):
        if len(times_ms) == 0 or len(times_ms) != len(delays_ms):
            raise AirlinkError(f"{source}: a delay series needs matching, non-empty time and delay columns")
        self.t = [float(x) for x in times_ms]
        self.d = [float(x) for x in delays_ms]
        for i in range(1, len(self.t)):
            if self.t[i] <= self.t[i - 1]:
                raise FormatError(f"{source}: row {i + 1}: times must increase")
        if any(d < 0 for d in self.d):
            raise FormatError(f"{source}: delays must not be negative")
        step = self.t[-1] - self.t[-2] if len(self.t) > 1 else 1.0
        self.period_ms = self.t[-1] + step
        self.source = source

    def delay_ms(self, t_ms: float) -> float:
        t = t_ms % self.period_ms
        i = bisect.bisect_right(self.t, t) - 1
        if i < 0:
            return self.d[0]
        if i >= len(self.t) - 1:
            return self.d[-1]
        t0, t1 = self.t[i], self.t[i + 1]
        return self.d[i] + (self.d[i + 1] - self.d[i]) * (t - t0) / (t1 - t0)

    def delay_ns(self, elapsed_ns: int) -> int:
        return int(self.delay_ms(elapsed_ns / 1e6) * 1e6)

    @classmethod
    def read_csv(cls, path) -> "DelaySeries":
        path = Path(path)
        if not path.exists():
            raise AirlinkError(f"{path}: no such file")
        times, delays, scale = [], [], 1.0
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if r and not r[0].lstrip().startswith("#")]
        if not rows:
            raise FormatError(f"{path}: empty delay series")
        tcol, dcol = 0, 1
        first = [c.strip().lower() for c in rows[0]]
        try:
            float(first[0])
        except ValueError:
            tnames = [i for i, c in enumerate(first) if c in ("time_ms", "time_s", "time", "t_ms")]
            dnames = [i for i, c in enumerate(first) if c.endswith("delay_ms") or c == "delay"]
            if not tnames or not dnames:
                raise FormatError(f"{path}: line 1: expected columns time_ms (or time_s) and delay_ms, "
                                  f"got {', '.join(first)}") from None
            tcol, dcol = tnames[0], dnames[0]
            scale = 1000.0 if first[tcol] == "time_s" else 1.0
            rows = rows[1:]
            start = 2
        else:
            start = 1
        for i, r in enumerate(rows):
            try:
                times.append(float(r[tcol]) * scale)
                delays.append(float(r[dcol]))
            except (ValueError, IndexError):
                raise FormatError(f"{path}: line {i + start}: expected two numbers, got {','.join(r)[:60]!r}") from None
        return cls(times, delays, source=str(path))


class LossStage(Stage):
    """Independent (Bernoulli) loss with ``rate``, or Gilbert-Elliott bursty loss.

    Gilbert-Elliott: a two-state Markov chain stepped once per packet, Good -> Bad with
    probability ``p_gb`` and Bad -> Good with ``p_bg``; a packet is lost with ``loss_g``
    in Good (default 0) and ``loss_b`` in Bad (default 1). The stationary loss rate is
    ``(p_bg*loss_g + p_gb*loss_b) / (p_gb + p_bg)`` and the mean burst ``1/p_bg`` packets.

    The coins come from :class:`airlink.replay.rng.SplitMix64`, the C loss stage's generator,
    drawn in the same order (one per packet, or the chain's step then the loss draw), so with
    one ``seed`` (None: a random one, handed to the C stage too) both engines drop the same
    packets.
    """

    kind = "loss"

    def __init__(self, rate: float = 0.0, *, gilbert=None, seed=None):
        super().__init__()
        self._rng = SplitMix64(seed)
        self.rate = float(rate)
        if not 0 <= self.rate <= 1:
            raise AirlinkError(f"loss rate must be between 0 and 1, got {rate}")
        self.seed = seed
        self.gilbert = None
        if gilbert is not None:
            g = [float(x) for x in gilbert]
            if len(g) == 2:
                g += [0.0, 1.0]
            if len(g) != 4 or not all(0 <= x <= 1 for x in g):
                raise AirlinkError("Gilbert-Elliott loss takes P_GB,P_BG[,LOSS_G,LOSS_B], each between 0 and 1")
            self.gilbert = g
            self._bad = False

    def fast(self):
        fp = _fastpath()
        if not fp:
            return None
        g = self.gilbert or [0.0, 0.0, 0.0, 1.0]
        return fp.loss(self.rate, self.gilbert is not None, *g, self._rng.seed)

    def expected_rate(self) -> float:
        if self.gilbert is None:
            return self.rate
        p_gb, p_bg, lg, lb = self.gilbert
        if p_gb + p_bg == 0:
            return lg
        return (p_bg * lg + p_gb * lb) / (p_gb + p_bg)

    def push(self, packet, now_ns: int) -> None:
        self.arrivals_packets += 1
        self.arrivals_bytes += len(packet)
        r = self._rng.random
        if self.gilbert is None:
            lost = r() < self.rate
        else:
            p_gb, p_bg, lg, lb = self.gilbert
            if self._bad:
                if r() < p_bg:
                    self._bad = False
            elif r() < p_gb:
                self._bad = True
            lost = r() < (lb if self._bad else lg)
        if lost:
            self.drops_packets += 1
            self.drops_bytes += len(packet)
        else:
            self._ready.append(packet)


class LinkStage(Stage):
    """A queue drained by a byte-granular capacity trace (see :mod:`airlink.replay.server`).

    Optional logs: ``log`` (an :class:`airlink.traces.LinkLogWriter`, mm-link's format;
    times in ms since ``base_ns``) and ``tti_log`` (a :class:`TTILogWriter`).
    """

    kind = "link"

    def __init__(self, capacity, tti, *, queue, start_ns: int = 0, loop: bool = True,
                 log=None, tti_log=None, base_ns: int | None = None):
        super().__init__()
        self.queue = queue
        self.server = TraceServer(capacity, tti, start_ns=start_ns, loop=loop,
                                  record=bool(log or tti_log))
        self.log, self.tti_log = log, tti_log
        self.base_ns = start_ns if base_ns is None else base_ns
        self._events = [] if log else None
        self._drops_logged = 0
        self._marks_logged = (0, 0)
        self._written_k = 0
        self._fast = None           # the C stage that serves this link, when it keeps the logs
        self._log_thread = None     # ... and the thread that writes them (.eventlog)

    @property
    def finished(self) -> bool:
        return self.server.finished

    def push(self, packet, now_ns: int) -> None:
        n = len(packet)
        self.arrivals_packets += 1
        self.arrivals_bytes += n
        q = self.queue
        before = q.drops_packets
        q.enqueue(packet, now_ns)
        if self._events is not None:
            self._events.append((now_ns, 1, n, 0))
            if q.drops_packets != before:
                self._log_drops(now_ns)
            if q.marks_packets != self._marks_logged[0]:
                self._log_marks(now_ns)

    def _log_marks(self, t):
        q = self.queue
        self._events.append((t, 4, q.marks_packets - self._marks_logged[0],
                             q.marks_bytes - self._marks_logged[1]))
        self._marks_logged = (q.marks_packets, q.marks_bytes)

    def _log_drops(self, t):
        q = self.queue
        self._events.append((t, 3, q.drops_packets - self._drops_logged,
                             q.drops_bytes - getattr(self, "_drop_bytes_logged", 0)))
        self._drops_logged = q.drops_packets
        self._drop_bytes_logged = q.drops_bytes

    def pull(self, now_ns: int) -> list:
        s = self.server
        if s._end_k > now_ns:
            return []
        deps = s.advance(now_ns, self.queue, self.arrivals_bytes)
        if self._events is not None:
            for p, a, t in deps:
                self._events.append((t, 2, len(p), t - a))
            if self.queue.drops_packets != self._drops_logged:
                self._log_drops(now_ns)
            if self.queue.marks_packets != self._marks_logged[0]:
                self._log_marks(now_ns)
            if len(self._events) > 20000:
                self._flush()
        elif self.tti_log is not None and len(s.rows) > 20000:
            self._flush()
        if not deps:
            return []
        out = [d[0] for d in deps]
        self.departures_packets += len(out)
        self.departures_bytes += sum(map(len, out))
        return out

    def next_event_ns(self):
        s = self.server
        if self.queue or s.in_service is not None:
            return s._end_k
        return None

    def queued(self) -> tuple:
        return self.server.backlog(self.queue)

    def fast_refusal(self):
        q, srv = self.queue, self.server
        if not srv.loop:
            return "a trace played once (not looping) runs the Python loop"
        if srv.k or len(q) or q.drops_packets or q.marks_packets:
            return "the link was already running"
        return super().fast_refusal()

    @property
    def per_packet(self) -> bool:
        """Whether the queue decides per packet (CoDel, PIE, L4S): the shell then reads
        packets of one segment (no GSO super-packets) for this link."""
        return self.queue.kind in PER_PACKET

    def fast(self):
        """The link in the C core, with the same queue (and the same seed for its coins)."""
        if self.fast_refusal():
            return None
        fp = _fastpath()
        srv = self.server
        tti = srv._tti_ns
        kind, packets, nbytes, aqm = core_parameters(self.queue)
        logs = self.log is not None or self.tti_log is not None
        c = fp.link(srv.capacity.astype("<f8").tobytes(), tti.numerator, tti.denominator,
                    srv.start_ns, kind, packets, nbytes, aqm, logs)
        if logs:
            from .eventlog import EventLogThread, formatter, in_log_order
            self._fast = c
            fmt = formatter()
            self._log_thread = EventLogThread(lambda raw, base_ns: fmt(in_log_order(raw), base_ns),
                                              name="airlink-link-log")
        return c

    def drain_fast(self) -> None:
        if self._fast is not None:
            self._flush()

    def forget_fast(self) -> None:
        if self._log_thread is not None:
            self._log_thread.close()
            self._log_thread = None
        self._fast = None

    def _hand_over_fast(self) -> None:
        """The C stage's per-TTI rows (as :meth:`TraceServer.records`) and logged events since
        the last call, handed to the logs' writer thread (:class:`.eventlog.EventLogThread`):
        the packet thread goes on while they are written."""
        c = self._fast
        rec = np.frombuffer(c.take_rows(), "<i8").reshape(-1, len(RECORD_COLUMNS)).astype(np.float64)
        raw = c.take_events()
        then = None
        if self.tti_log is not None and len(rec):
            def then(tti_log=self.tti_log, rec=rec, server=self.server):
                tti_log.write(rec, server)
        self._log_thread.put(self.log, raw if self.log is not None else b"", self.base_ns, then)

    def stats(self) -> dict:
        out = super().stats()
        out.update(drops_packets=self.queue.drops_packets, drops_bytes=self.queue.drops_bytes,
                   capacity_bytes=self.server.capacity_bytes, queue=self.queue.describe(),
                   ttis=self.server.k, ecn=self.queue.ecn,
                   marks_packets=self.queue.marks_packets, marks_bytes=self.queue.marks_bytes)
        return out

    def _flush(self):
        if self._fast is not None:
            self._hand_over_fast()
            return
        rec = self.server.take_records()
        events = self._events or []
        if self.log is not None:
            self._events = []
            s = self.server
            for row in rec:
                if row[1] > 0:
                    # the opportunity is at the end of its TTI
                    events.append((s._boundary(int(row[0]) + 1), 0, int(row[1]), 0))
        if self.tti_log is not None and len(rec):
            self.tti_log.write(rec, self.server)
        if self.log is not None:
            write_events(self.log, self.base_ns, events)

    def close(self, now_ns: int) -> None:
        try:
            if self.log is not None or self.tti_log is not None:
                self._flush()
            if self._log_thread is not None:
                thread, self._log_thread = self._log_thread, None
                thread.close()
            if self.log is not None:
                self.log.close()
            if self.tti_log is not None:
                self.tti_log.close()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Stop logging after a failure: logs not finished stay as ``NAME.partial``."""
        for log in (self.log, self.tti_log):
            if log is not None:
                log.abort()


def write_events(log, base_ns: int, events: list) -> None:
    """Write events ``(t, kind, a, b)`` - opportunity 0 (bytes), arrival 1 (bytes), departure
    2 (bytes, delay ns), drop 3 and mark 4 (packets, bytes) - to an mm-link log
    (times in ms since ``base_ns``), in time order (at one time: opportunities, arrivals,
    departures, drops, marks); sorts ``events`` in place."""
    events.sort(key=lambda e: (e[0], e[1]))
    line = log.event_line
    lines = []
    for t, kind, a, b in events:
        ms = (t - base_ns) / 1e6
        if kind == 0:
            lines.append(line(ms, "#", a))
        elif kind == 1:
            lines.append(line(ms, "+", a))
        elif kind == 2:
            lines.append(line(ms, "-", a, round(b / 1e6)))
        elif kind == 3:
            lines.append(line(ms, "d", a, b))
        else:
            lines.append(line(ms, "m", a, b))
    log.write_lines("".join(lines))


def _fastpath():
    """The compiled fast path, or None (not built, or AIRLINK_PURE_PYTHON=1)."""
    if env_flag("AIRLINK_PURE_PYTHON", False):
        return None
    try:
        from . import _fastpath as fp
    except ImportError:
        return None
    return fp


def offload_wanted() -> bool:
    """Whether the shells open their TUN devices for offload (GSO super-packets through the
    C fast path): yes unless ``AIRLINK_OFFLOAD=0`` or the fast path is off or not built."""
    return env_flag("AIRLINK_OFFLOAD", True) and _fastpath() is not None


def relay_threads() -> int:
    """Threads of the C relay: 1 (the default) or 2, one per direction
    (``AIRLINK_RELAY_THREADS=2``). One is the default: the two threads each wake for their
    own direction's packets, far more often than the single loop, which costs the CPU the
    relay would need on a machine with few cores."""
    import os
    return 2 if os.environ.get("AIRLINK_RELAY_THREADS", "1").strip() == "2" else 1


class TTILogWriter:
    """Per-TTI Parquet log of a link direction, written in pieces; columns of the
    ``mac`` kind: ``time`` (UTC, TTI start), ``user``, ``capacity_bytes``,
    ``served_bytes``, ``backlog_bytes``, ``backlog_packets`` (at the TTI's end),
    ``drops_packets``, ``drops_bytes``, ``arrivals_bytes`` (during the TTI), plus ``tti``."""

    def __init__(self, path, *, user: str = "1", wall_start_ns: int = 0, meta: dict | None = None):
        self.path = Path(path)
        self.user = str(user)
        self.wall_start_ns = int(wall_start_ns)
        self.meta = dict(meta or {})
        self._writer = None

    def write(self, rec, server) -> None:
        import json

        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq
        k = rec[:, 0].astype(np.int64)
        start = np.array([server._boundary(int(x)) for x in k], dtype=np.int64) \
            if len(k) < 64 else _boundaries(server, k)
        time = pa.array(start - server.start_ns + self.wall_start_ns, type=pa.timestamp("ns", tz="UTC"))
        cols = {"time": time, "user": pa.array([self.user] * len(k))}
        for i, name in enumerate(("capacity_bytes", "served_bytes", "backlog_bytes", "backlog_packets",
                                  "drops_packets", "drops_bytes", "arrivals_bytes"), start=1):
            cols[name] = pa.array(rec[:, i].astype(np.int64))
        cols["tti"] = pa.array(k)
        table = pa.table(cols)
        try:
            if self._writer is None:
                meta = {"kind": "mac", "tti_s": f"{server.tti.numerator}/{server.tti.denominator}",
                        **self.meta}
                schema = table.schema.with_metadata({b"airlink": json.dumps(meta, default=str).encode()})
                self._writer = pq.ParquetWriter(create_partial(self.path), schema)
            self._writer.write_table(table.replace_schema_metadata(self._writer.schema.metadata))
        except OSError as exc:
            self.abort()
            raise output_error(self.path, exc, doing="logging") from None

    def abort(self) -> None:
        """Stop writing; what was written stays as ``NAME.partial`` (not a complete log)."""
        writer, self._writer = self._writer, False
        if writer:
            try:
                writer.close()
            except OSError:
                pass

    def close(self) -> None:
        """Finish the log and give it its final name (``NAME.partial`` -> ``NAME``)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        if self._writer is False:       # aborted: stays partial
            return
        try:
            if self._writer is None:
                empty = {"time": pa.array([], pa.timestamp("ns", tz="UTC")), "user": pa.array([], pa.string())}
                for name in ("capacity_bytes", "served_bytes", "backlog_bytes", "backlog_packets",
                             "drops_packets", "drops_bytes", "arrivals_bytes", "tti"):
                    empty[name] = pa.array([], pa.int64())
                pq.write_table(pa.table(empty), create_partial(self.path))
            else:
                self._writer.close()
        except OSError as exc:
            raise output_error(self.path, exc, doing="logging") from None
        self._writer = False
        commit(self.path)


def _boundaries(server, k):
    """TTI start times (ns) for many TTIs, exact (integer arithmetic on the Fraction)."""
    num, den = server._tti_ns.numerator, server._tti_ns.denominator
    import numpy as np
    k = np.asarray(k, dtype=np.int64)
    if not len(k) or int(k.max()) * num < 2**63:      # the products fit: int64 is exact
        return server.start_ns + k * num // den
    return server.start_ns + (k.astype(object) * num // den).astype(np.int64)
